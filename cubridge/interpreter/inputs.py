"""The inputs the executor binds to a transferred kernel beyond q, k, v: the spec's captured tensors and
the block lists of a data-dependent mask, as numpy arrays by kernel argument name."""

from __future__ import annotations

import numpy as np

from cubridge.passes.transfer_match import kv_tile_width
from cubridge.runtime.kernel_inputs import TABLES, build_block_lists, captured_table, default_device


def kernel_inputs(spec, kernel, q, k, v) -> dict[str, np.ndarray]:
    """The tables `kernel` takes: captured tensors and the block lists `kv_num_blocks`, `kv_indices`,
    `full_kv_num_blocks`, `full_kv_indices`, where it takes them. The spec's hooks must be evaluable at the shapes
    of q and k (`AttentionSpec.check_evaluable`)."""
    names = {name.data for name in kernel.arg_names.data}
    inputs = {
        name: captured_table(tensor, "cpu").numpy() for name, tensor in spec.captures.items() if name in names
    }
    if not any(name in names for name in TABLES):
        return inputs
    batch, heads, seqlen_q, _ = q.shape
    tables = _block_lists(spec, kernel, (batch, heads, seqlen_q, k.shape[2]))
    return inputs | {name: table.numpy() for name, table in tables.items() if name in names}


def _block_lists(spec, kernel, shape: tuple[int, int, int, int]) -> dict:
    """The spec's block lists for (B, HQ, SQ, SKV) in the kernel's tiles, on the CPU."""
    device = default_device()
    return build_block_lists(spec.mask_on(device), shape, kernel.tile_m.value.data, kv_tile_width(kernel), device)


def block_list_tables(spec, kernel, shape) -> dict:
    """The block lists of `shape` under the spec's mask, by name (`kv_num_blocks`, ...: [B, HQ, QT] counts in
    schedule-independent order, batch, head, query tile; [B, HQ, QT, KT] indices)."""
    spec.check_divisors((shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
                        (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim))
    return _block_lists(spec, kernel, (shape.batch, shape.heads_q, shape.seqlen_q, shape.seqlen_kv))
