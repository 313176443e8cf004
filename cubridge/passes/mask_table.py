"""FlexAttention-style block lists computed before the kernel, for masks the
symbolic analysis cannot bound.

A mask that reads captured data (document ids, a block pattern) or the batch
and head has no closed form, and its kept kv tiles need not be contiguous.
Its kernel takes four int32 inputs, with FlexAttention's `BlockMask` names and
meaning, per work tile (b, h, q_tile):

- `kv_num_blocks [B, HQ, QT]`, `kv_indices [B, HQ, QT, KT]`: the partial kv
  tiles (at least one masked and one kept entry), ascending, in the first
  `kv_num_blocks` slots;
- `full_kv_num_blocks [B, HQ, QT]`, `full_kv_indices [B, HQ, QT, KT]`: the
  full kv tiles (no masked entry), likewise.

Empty tiles (no kept entry) are in neither list. Unused slots hold other tile
indices (any value would do). Entries past the sequence ends count as masked,
so a kv tile that runs past SKV is never full. Tile sizes are the kernel's:
`tile_m` query rows, and its kv tile size.

The kernel walks one sequence of positions p = 0 .. n_partial + n_full - 1,
partial tiles first (with mask code), then full tiles (without):
`tile_at(p)` is `kv_indices[p]` for p < n_partial, else
`full_kv_indices[p - n_partial]`. Producers and consumers walk the same
positions, so pipeline counters stay in step.

`build_block_lists` materializes the mask tile by tile with torch
(vectorized, on the GPU when there is one), as FlexAttention's
`create_block_mask` does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from cubridge.frontends.expr import INT, Expr, argument, binary, constant, gather, select
from cubridge.passes.mask_analysis import TilePlan

NUM_BLOCKS, INDICES = "kv_num_blocks", "kv_indices"
FULL_NUM_BLOCKS, FULL_INDICES = "full_kv_num_blocks", "full_kv_indices"
# Kernel inputs and their ranks, in argument order.
TABLES = {NUM_BLOCKS: 3, INDICES: 4, FULL_NUM_BLOCKS: 3, FULL_INDICES: 4}

_COORDINATES = (argument("b"), argument("h"), argument("q_tile"))


def _count(name: str) -> Expr:
    return gather(name, _COORDINATES, INT)


def _entry(name: str, position: Expr) -> Expr:
    return gather(name, (*_COORDINATES, position), INT)


def list_plan() -> TilePlan:
    """The plan over positions of the work tile's sequence: all of [0, n_partial +
    n_full) is visited, positions [n_partial, n_partial + n_full) are full tiles.
    Each work tile has its own lists, so the visited range varies by tile."""
    partial, total = _count(NUM_BLOCKS), binary("add", _count(NUM_BLOCKS), _count(FULL_NUM_BLOCKS))
    return TilePlan(constant(0), total, partial, total, varies_by_tile=True)


def tile_at(position: Expr) -> Expr:
    """The kv tile index at `position` of the sequence (partial tiles, then full).

    Past the end it reads an unused slot or, outside the table, 0 (`cuir.gather`
    reads zero there): some tile, and only a prefetch or the zero-entry case
    (every tile empty, so every entry masked) visits it.
    """
    partial = _count(NUM_BLOCKS)
    return select(
        binary("lt", position, partial),
        _entry(INDICES, position),
        _entry(FULL_INDICES, binary("sub", position, partial)),
    )


def _ascending(flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Count of True along the last axis, and their positions first, ascending."""
    order = torch.sort((~flags).to(torch.int8), dim=-1, stable=True).indices
    return flags.sum(dim=-1), order


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def classify_kv_tiles(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
    device: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full) bool [B, HQ, QT, KT] for `mask_mod` and (B, HQ, SQ, SKV) = `shape`.

    `mask_mod` gets index tensors on `device` (default: the GPU when there is one),
    so the tensors it reads must live there too (see `AttentionSpec.extra_inputs`).
    """
    batch, heads, seqlen_q, seqlen_kv = shape
    device = device or default_device()
    q_tiles, kv_tiles = -(-seqlen_q // block_m), -(-seqlen_kv // block_n)
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, -1, 1, 1)
    q = torch.arange(q_tiles * block_m, device=device).view(1, 1, -1, 1)
    kv = torch.arange(kv_tiles * block_n, device=device).view(1, 1, 1, -1)
    rows, columns = q < seqlen_q, kv < seqlen_kv
    keep = torch.as_tensor(mask_mod(b, h, q.clamp(max=seqlen_q - 1), kv.clamp(max=seqlen_kv - 1))).to(device)
    # reduce at the mask's own broadcast shape (a mask that reads neither b nor h is one [Q, KV] plane), then
    # expand: materializing [B, H, Q, KV] would take B * H times the memory
    planes = (keep.shape[0] if keep.dim() == 4 else 1, keep.shape[1] if keep.dim() == 4 else 1)
    keep = keep.expand(*planes, q.shape[2], kv.shape[3]) & columns
    tiles = (*planes, q_tiles, block_m, kv_tiles, block_n)
    kept = (keep & rows).view(tiles).any(dim=5).any(dim=3)
    full = (keep | ~rows).view(tiles).all(dim=5).all(dim=3)
    shape = (batch, heads, q_tiles, kv_tiles)
    return (kept & ~full).expand(shape), full.expand(shape)


def build_block_lists(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
    device: str | None = None,
    keep_on_device: bool = False,
) -> dict[str, torch.Tensor]:
    """The four int32 tables (by kernel input name) for `mask_mod` and (B, HQ, SQ, SKV) = `shape`, contiguous,
    on the CPU (or, with `keep_on_device`, where they were built)."""
    partial, full = classify_kv_tiles(mask_mod, shape, block_m, block_n, device)
    num_partial, partial_indices = _ascending(partial)
    num_full, full_indices = _ascending(full)
    tables = {
        NUM_BLOCKS: num_partial,
        INDICES: partial_indices,
        FULL_NUM_BLOCKS: num_full,
        FULL_INDICES: full_indices,
    }
    target = None if keep_on_device else "cpu"
    return {name: t.to(device=target, dtype=torch.int32).contiguous() for name, t in tables.items()}
