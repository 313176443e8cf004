"""The launch path's host side without a GPU: tile counters, parameter views, block-list shapes, and a variant's
launch plan (made once per layout, then only data pointers written per call) seen through a recording launch."""

from __future__ import annotations

import ctypes
import importlib
from pathlib import Path

import pytest
import torch

from cubridge.runtime import driver
from cubridge.runtime.attention import layout_key
from cubridge.runtime.errors import InvalidInputError
from cubridge.runtime.kernel_inputs import MASK_BITS, TABLES, block_list_shapes, build_block_lists
from cubridge.runtime.variant import build_variant

SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"
CPU = torch.device("cpu")


def test_tile_counters_are_one_per_launch_and_zeroed_on_their_stream_when_all_were_used(monkeypatch):
    monkeypatch.setattr(driver, "_counter_slabs", {})
    monkeypatch.setattr(driver, "COUNTER_SLOTS", 4)
    first = [driver.tile_counter(CPU, 0, 11, capturing=False) for _ in range(4)]
    slab = first[0][1]
    assert [address for address, _ in first] == [slab.data_ptr() + 4 * i for i in range(4)]
    slab.fill_(99)  # what the kernels left in them
    address, owner = driver.tile_counter(CPU, 0, 11, capturing=False)
    assert owner is slab and address == slab.data_ptr() and torch.equal(slab, torch.zeros(4, dtype=torch.int32))
    other_stream, _ = driver.tile_counter(CPU, 0, 12, capturing=False)
    assert other_stream != slab.data_ptr()
    address, fresh = driver.tile_counter(CPU, 0, 11, capturing=True)  # owned by the graph being captured
    assert fresh is not slab and address == fresh.data_ptr() and fresh.item() == 0


def test_pointer_fields_write_the_structure():
    from cubridge.runtime.attention_sm90 import Sm90Params

    params = Sm90Params(None, None, None, None, 1, 2, 3, 4, 5, 6, 0.5, 0.7)
    lse, out, counter, order = driver.pointer_fields(params, ("lse", "out", "tile_counter", "tile_order"))
    lse.value, out.value, counter.value, order.value = 0x1000, 0x3000, 0x2040, 0x4000
    assert (params.lse, params.out, params.tile_counter, params.tile_order, params.num_heads_kv) == (
        0x1000, 0x3000, 0x2040, 0x4000, 3)


@pytest.mark.parametrize("shape", [(2, 3, 130, 257), (1, 1, 1, 1)])
def test_block_list_shapes_are_those_of_the_built_lists(shape):
    def mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    built = build_block_lists(mask, shape, 128, 128, device="cpu")
    assert {name: tuple(table.shape) for name, table in built.items()} == block_list_shapes(shape, 128, 128)


class RecordedLaunch:
    """Stands in for driver.LaunchPlan: keeps the plan's parameters and, at each launch, their bytes."""

    made: list[RecordedLaunch] = []

    def __init__(self, function, grid, block, dynamic_shared_bytes, parameters, device_index):
        self.grid, self.block, self.parameters = grid, block, parameters
        self.launches = []
        RecordedLaunch.made.append(self)

    def launch(self, stream):
        self.launches.append([ctypes.string_at(ctypes.addressof(p), ctypes.sizeof(p)) for p in self.parameters])


class RecordedMaps:
    def __init__(self, q, k, v, out, block_n):
        self.maps = [ctypes.c_uint64(0) for _ in range(4)]
        self.addresses = []

    def point_at(self, addresses):
        self.addresses.append(addresses)


@pytest.fixture
def recorded(monkeypatch):
    """The sm90 launch path on CPU tensors: the GPU checks, the function load, the stream and the launch
    replaced, everything else (plans, tables, block lists, parameter writes) as on the GPU."""
    sm90 = importlib.import_module("cubridge.runtime.attention_sm90")
    host = importlib.import_module("cubridge.runtime.attention")
    variant = importlib.import_module("cubridge.runtime.variant")
    checks = []

    def prepare_launch(q, k, v, scale, kernel, head_dims):
        checks.append(tuple(q.shape))
        host.validate_inputs(q, k, v, kernel=kernel, head_dims=head_dims)
        return (0.125 if scale is None else scale), 0, (9, 0)

    monkeypatch.setattr(variant, "prepare_launch", prepare_launch)
    monkeypatch.setattr(variant, "load_function", lambda *args: "function")
    monkeypatch.setattr(sm90, "load_function", lambda *args: "function")  # sm90 entry points (K/V pairs or not)
    monkeypatch.setattr(sm90, "max_active_clusters", lambda *args: 66)
    monkeypatch.setattr(variant, "current_stream", lambda index: 5)
    monkeypatch.setattr(variant, "stream_capturing", lambda stream: False)
    monkeypatch.setattr(sm90, "LaunchPlan", RecordedLaunch)
    monkeypatch.setattr(host, "LaunchPlan", RecordedLaunch)
    monkeypatch.setattr(sm90, "tensor_map_slots", RecordedMaps)
    monkeypatch.setattr(sm90, "_sm_count", lambda index: 132)
    monkeypatch.setattr(driver, "_counter_slabs", {})
    monkeypatch.setattr(RecordedLaunch, "made", [])
    def build(spec: str = "document_mask.py", reference: str = "sm90"):
        kernel = build_variant(str(SPECS / spec), reference)
        kernel._instances[("bf16", 128)] = (kernel.lowered(), None)  # no nvcc: the launch is recorded
        return kernel

    return build, checks


def _args(kernel, raw: bytes):
    from cubridge.runtime.variant import _table_struct

    return _table_struct(kernel.lowered().args).from_buffer_copy(raw)


def test_a_variant_checks_once_per_layout_and_writes_only_each_calls_pointers(recorded):
    from cubridge.runtime.attention_sm90 import Sm90Params

    build, checks = recorded
    kernel = build()
    q = torch.randn(1, 2, 200, 128, dtype=torch.bfloat16)
    k, v = torch.randn(2, 1, 2, 300, 128, dtype=torch.bfloat16)
    ids = torch.repeat_interleave(torch.arange(3), torch.tensor([100, 150, 50]))
    first, lse = kernel(q, k, v, return_lse=True, document_id=ids)
    second, _ = kernel(q, k, v, return_lse=True, document_id=ids)
    ids[:] = 0  # new values in place: a new copy and new block lists, the same plan
    kernel(q, k, v, return_lse=True, document_id=ids)
    assert checks == [(1, 2, 200, 128)] and len(RecordedLaunch.made) == 1
    plan = RecordedLaunch.made[0]
    assert plan.grid == (min(2 * 2, 132), 1, 1) and plan.block == (kernel.lowered().threads, 1, 1)
    calls = [(Sm90Params.from_buffer_copy(params), _args(kernel, args)) for *_, params, args in plan.launches]
    assert [params.lse for params, _ in calls][:1] == [lse.data_ptr()]
    assert [params.out for params, _ in calls][:1] == [first.data_ptr()]  # the rows of skipped empty tiles
    orders = [params.tile_order for params, _ in calls]  # block lists: the tiles' order, remade with the lists
    assert all(orders) and orders[0] == orders[1] != orders[2]
    counters = [params.tile_counter for params, _ in calls]
    slab = driver._counter_slabs[0, 5][0]
    assert counters == [slab.data_ptr() + 4 * i for i in range(3)]  # one zeroed counter per launch
    sizes = [(p.batch, p.num_heads_q, p.num_heads_kv, p.seqlen_q, p.seqlen_k) for p, _ in calls]
    assert sizes == [(1, 2, 2, 200, 300)] * 3
    copies = [args.document_id_data for _, args in calls]
    assert copies[0] == copies[1] != copies[2]
    assert list(calls[0][1].document_id_dims) == [300]
    lists = kernel._block_lists[next(iter(kernel._block_lists))][2]
    assert calls[2][1].kv_num_blocks_data == lists["kv_num_blocks"].data_ptr()
    assert list(calls[2][1].full_kv_indices_dims) == [1, 2, 2, 3]
    assert list(first.shape) == [1, 2, 200, 128] and first.is_contiguous() and second.data_ptr() != 0


def test_a_new_layout_makes_a_new_plan_and_bad_inputs_still_fail_each_call(recorded):
    build, checks = recorded
    kernel = build()
    q = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16)
    kernel(q, q, q)
    kernel(q[:, :, :32], q[:, :, :32], q[:, :, :32])
    kernel(q, q, q, scale=0.5)
    assert checks == [(1, 2, 64, 128), (1, 2, 32, 128), (1, 2, 64, 128)]
    misaligned = torch.randn(1, 2, 64 * 128 + 1, dtype=torch.bfloat16)[..., 1:].view(1, 2, 64, 128)
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="16-byte aligned"):
            kernel(misaligned, q, q)
    with pytest.raises(InvalidInputError, match="captured tensor 'document_id' must be a 1-D tensor"):
        kernel(q, q, q, document_id=[0] * 64)
    assert len(checks) == 5 and set(TABLES) <= {name for name, _ in kernel.lowered().args}


def test_an_sm80_plan_points_each_launch_at_its_own_tensors(recorded):
    from cubridge.runtime.attention import AttentionParams

    build, checks = recorded
    kernel = build("causal.py", "sm80")
    inputs = [torch.randn(3, 2, 4, 130, 128, dtype=torch.bfloat16) for _ in range(2)]
    outputs = [kernel(*call, return_lse=True) for call in inputs]
    assert len(checks) == 1 and len(RecordedLaunch.made) == 1
    plan = RecordedLaunch.made[0]
    assert plan.grid == (2, 4, 2) and plan.block == (kernel.lowered().threads, 1, 1)
    for (q, k, v), (out, lse), (raw, _) in zip(inputs, outputs, plan.launches):
        params = AttentionParams.from_buffer_copy(raw)
        assert (params.q, params.k, params.v) == (q.data_ptr(), k.data_ptr(), v.data_ptr())
        assert (params.o, params.lse) == (out.data_ptr(), lse.data_ptr())
        assert (params.q_stride_b, params.o_stride_h, params.seqlen_k) == (4 * 130 * 128, 130 * 128, 130)


def _given(mask, shape, block_size=(128, 128), batch_heads=(1, 1)):
    from cubridge.runtime.kernel_inputs import GivenBlockLists

    tables = build_block_lists(mask, (*batch_heads, *shape[2:]), *block_size, device="cpu")
    return GivenBlockLists.of(list(tables.values()), [*block_size, *shape[2:]])


def test_given_block_lists_are_used_where_they_fit_and_expanded_once_per_object(recorded):
    """Lists given for the kernel's tiles (sm80: 128 x 64) and this problem's sequence lengths are expanded to
    [B, HQ, ...] once and reused while the same object is given; new lists (another object) are expanded again;
    lists for other tiles or lengths leave the kernel to build its own."""
    build, _ = recorded
    kernel = build(reference="sm80")
    q = torch.randn(2, 2, 200, 128, dtype=torch.bfloat16)
    k, v = torch.randn(2, 2, 2, 300, 128, dtype=torch.bfloat16)
    ids = torch.zeros(300, dtype=torch.int64)

    def mask(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    given = _given(mask, (2, 2, 200, 300), block_size=(128, 64))
    for call in (given, given, _given(mask, (2, 2, 200, 300), block_size=(128, 64))):
        kernel.launch(layout_key(q, k, v), q, k, v, None, False, [ids], call)
    assert not kernel._block_lists  # none built
    calls = [_args(kernel, raw[-1]) for raw in RecordedLaunch.made[0].launches]
    expanded = kernel._given_expansion[2]
    assert calls[0].kv_num_blocks_data == calls[1].kv_num_blocks_data != calls[2].kv_num_blocks_data
    assert calls[2].kv_indices_data == expanded["kv_indices"].data_ptr()
    assert list(calls[2].kv_indices_dims) == [2, 2, 2, 5] and expanded["kv_indices"].is_contiguous()
    assert torch.equal(expanded["kv_num_blocks"][1, 1], given.lists[0][0, 0].int())
    for other in (_given(mask, (2, 2, 200, 300)), _given(mask, (2, 2, 100, 300), block_size=(128, 64))):
        kernel.launch(layout_key(q, k, v), q, k, v, None, False, [ids], other)
    assert len(RecordedLaunch.made) == 3 and len(kernel._block_lists) == 1
    own = next(iter(kernel._block_lists.values()))[2]
    own_call = _args(kernel, RecordedLaunch.made[2].launches[0][-1])
    assert own_call.kv_indices_data == own["kv_indices"].data_ptr() and MASK_BITS not in own


def test_a_kernel_with_mask_bits_builds_its_own_lists_beside_a_block_mask(recorded, monkeypatch):
    """A Hopper block-list kernel takes the mask's bits in the order of its partial tiles, so it builds its own
    lists beside them from the spec's mask and the captured tensors (once for them), whatever lists are given,
    even lists that fit its tiles; other given lists of the same layout leave its tables as they are."""
    variant = importlib.import_module("cubridge.runtime.variant")
    orders = []
    monkeypatch.setattr(variant, "tile_order", lambda *args: orders.append(args) or torch.zeros(8, dtype=torch.int32))
    build, _ = recorded
    kernel = build()
    q = torch.randn(2, 2, 200, 128, dtype=torch.bfloat16)
    k, v = torch.randn(2, 2, 2, 300, 128, dtype=torch.bfloat16)
    ids = torch.repeat_interleave(torch.arange(3), torch.tensor([90, 110, 100]))

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    given = _given(causal, (2, 2, 200, 300))
    for call in (given, given, _given(causal, (2, 2, 200, 300))):
        kernel.launch(layout_key(q, k, v), q, k, v, None, False, [ids], call)
    assert [key[-1] for key in kernel._block_lists] == [True] and kernel._given_expansion is None
    assert len(orders) == 1  # the tables (and the tiles' order made from them) once
    own = next(iter(kernel._block_lists.values()))[2]
    calls = [_args(kernel, raw[-1]) for raw in RecordedLaunch.made[0].launches]
    assert calls[0].kv_indices_data == calls[1].kv_indices_data == own["kv_indices"].data_ptr()
    assert calls[0].mask_bits_data == own[MASK_BITS].data_ptr()
    assert list(calls[0].mask_bits_dims) == [1, 1, 2, 3, 512]  # the mask reads neither b nor h: one plane
    # the spec's mask (documents) with the captured ids, not the mask that made the given lists
    documents = build_block_lists(lambda b, h, q_idx, kv_idx: ids[q_idx] == ids[kv_idx], (2, 2, 200, 300), 128,
                                  128, "cpu", mask_bits=True)
    assert all(torch.equal(own[name].cpu(), documents[name]) for name in documents)
    assert not torch.equal(documents["kv_num_blocks"], given.lists[0].expand(2, 2, 2))


def test_a_repeated_calls_tables_are_reused_and_rewritten_after_a_captured_call(recorded, monkeypatch):
    """A call with the plan, captured tensors and versions of the previous one reuses its tables (no pointer
    written); another tensor of the same values gets its own copy; a call while a CUDA graph is captured makes
    its tables inside the graph, and the next call points the kernel at the kept ones again."""
    variant = importlib.import_module("cubridge.runtime.variant")
    build, _ = recorded
    kernel = build()
    q = torch.randn(1, 2, 200, 128, dtype=torch.bfloat16)
    ids = torch.repeat_interleave(torch.arange(2), torch.tensor([120, 80]))
    kernel(q, q, q, document_id=ids)
    kernel(q, q, q, document_id=ids)
    rebound = ids.clone()
    kernel(q, q, q, document_id=rebound)
    monkeypatch.setattr(variant, "stream_capturing", lambda stream: True)
    kernel(q, q, q, document_id=rebound)
    monkeypatch.setattr(variant, "stream_capturing", lambda stream: False)
    kernel(q, q, q, document_id=rebound)
    calls = [_args(kernel, args) for *_, args in RecordedLaunch.made[0].launches]
    copies = [call.document_id_data for call in calls]
    lists = [call.kv_indices_data for call in calls]
    assert copies[0] == copies[1] != copies[2] and lists[0] == lists[1] != lists[2]
    assert copies[3] != copies[2] and lists[3] != lists[2]
    assert copies[4] == copies[2] and lists[4] == lists[2]


def test_shapes_called_in_turn_keep_their_block_lists_and_tables(recorded, monkeypatch):
    """A variant called on two shapes in turn builds each shape's lists once and reuses each plan's tables; new
    values for a shape's captured tensor replace that shape's lists (memory grows with the shapes, not the
    calls); past KEPT_SHAPES shapes the oldest is dropped and built again when it comes back."""
    variant = importlib.import_module("cubridge.runtime.variant")
    builds = []

    def counted(mask, shape, *args, **kwargs):
        builds.append(shape)
        return build_block_lists(mask, shape, *args, **kwargs)

    monkeypatch.setattr(variant, "build_block_lists", counted)
    build, _ = recorded
    kernel = build()
    ids = torch.repeat_interleave(torch.arange(2), torch.tensor([150, 150]))
    long, short = torch.randn(1, 2, 300, 128, dtype=torch.bfloat16), torch.randn(1, 2, 100, 128, dtype=torch.bfloat16)
    for q in (long, short, long, short):
        kernel(q, long, long, document_id=ids)
    assert builds == [(1, 2, 300, 300), (1, 2, 100, 300)]
    plans = RecordedLaunch.made
    long_calls = [_args(kernel, args) for *_, args in plans[0].launches]
    assert long_calls[0].kv_indices_data == long_calls[1].kv_indices_data
    ids[:] = 1  # new values: the shape's lists are built again and replace the old ones
    kernel(long, long, long, document_id=ids)
    assert builds[2:] == [(1, 2, 300, 300)] and len(kernel._block_lists) == 2
    for rows in range(1, variant.KEPT_SHAPES + 1):
        kernel(torch.randn(1, 2, rows, 128, dtype=torch.bfloat16), long, long, document_id=ids)
    assert len(kernel._block_lists) == len(kernel._plan_tables) == variant.KEPT_SHAPES
    kernel(long, long, long, document_id=ids)
    assert builds[-1] == (1, 2, 300, 300) and len(builds) == 3 + variant.KEPT_SHAPES + 1


def test_tile_order_is_longest_first_within_each_chunk_of_heads_then_in_the_tail():
    from cubridge.runtime.kernel_inputs import PARTIAL_TILE_COST, TAIL_WAVES, tile_order

    generator = torch.Generator().manual_seed(0)
    partial = torch.randint(0, 5, (2, 3, 4), generator=generator, dtype=torch.int32)
    full = torch.randint(0, 9, (2, 3, 4), generator=generator, dtype=torch.int32)
    cost = (full.float() + PARTIAL_TILE_COST * partial.float()).flatten()
    workers = 4
    made = tile_order(partial, full, head_chunk=4, workers=workers)
    order = made.tolist()
    assert made.dtype == torch.int32 and sorted(order) == list(range(24))  # a permutation of the tiles
    costs = [cost[tile].item() for tile in order]
    # the tail: the tiles from which at most TAIL_WAVES waves of work is left, a wave being one mean visited tile
    # a worker; it starts inside the first chunk here
    wave = workers * cost.sum().item() / (cost > 0).sum().item()
    tail = next(i for i in range(24) if sum(costs[i:]) <= TAIL_WAVES * wave + 1e-4)
    assert 4 <= tail < 16 and costs[tail:] == sorted(costs[tail:], reverse=True)
    chunks = [tile // (4 * 4) for tile in order[:tail]]  # 4 q tiles a pair, 4 pairs a chunk: 16 tiles, then 8
    assert chunks == sorted(chunks)  # before the tail, the chunks in turn, each longest first
    for chunk in set(chunks):
        ahead = [c for c, k in zip(costs, chunks) if k == chunk]
        assert ahead == sorted(ahead, reverse=True)
