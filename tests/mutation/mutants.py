"""Planted bugs: each mutant edits the parsed (and possibly transferred) IR of a
reference kernel, the way a wrong hand edit or a wrong pass would.

A mutant names its program (sm90 or sm80), the spec it is transferred to and
verified against (None: the reference kernel and standard attention), and a
function that finds its op by structure (op name, SSA names of operands and
results, enclosing worker or map) and changes an operand, an attribute or a
constant, or drops or moves an op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from cubridge.dialect import cuir

ROOT = Path(__file__).resolve().parents[2]
MUTATION_SPECS = Path(__file__).resolve().parent / "specs"


def example_spec(name: str) -> str:
    return str(ROOT / "examples" / "specs" / f"{name}.py")


def mutation_spec(name: str) -> str:
    return str(MUTATION_SPECS / f"{name}.py")


@dataclass(frozen=True)
class Mutant:
    name: str
    program: str
    spec: str | None
    mutate: Callable[[Operation], None]


# ----------------------------------------------------------------------------
# Finding ops
# ----------------------------------------------------------------------------


def _hint(value: SSAValue) -> str | None:
    return value.name_hint


def worker(module: Operation, name: str) -> cuir.WorkerOp:
    return next(op for op in module.walk() if isinstance(op, cuir.WorkerOp) and op.sym_name.data == name)


def ops(scope: Operation, name: str, *operand_hints: str, result: str | None = None) -> list[Operation]:
    """Ops called `name` under `scope` that read values named `operand_hints` (and
    define one named `result`), in program order."""
    found = []
    for op in scope.walk():
        if op.name != name:
            continue
        hints = [_hint(operand) for operand in op.operands]
        if any(hint not in hints for hint in operand_hints):
            continue
        if result is not None and result not in [_hint(r) for r in op.results]:
            continue
        found.append(op)
    return found


def only(scope: Operation, name: str, *operand_hints: str, result: str | None = None) -> Operation:
    (op,) = ops(scope, name, *operand_hints, result=result)
    return op


def only_in_block(block, name: str) -> Operation:
    """The one op called `name` directly in `block` (not in nested regions)."""
    (op,) = [op for op in block.ops if op.name == name]
    return op


def loop_body(module: Operation, index: int = 0) -> Operation:
    """The `index`-th kv loop (scf.for) of the consumer, which carries the softmax state."""
    return [op for op in ops(worker(module, "consumer"), "scf.for") if len(op.results) > 1][index]


def tile_body(module: Operation, role: str = "consumer"):
    """The block of the worker's tile loop (cuir.for_each_tile)."""
    return only(worker(module, role), "cuir.for_each_tile").body.block


def value(scope: Operation, hint: str) -> SSAValue:
    """The first value named `hint` under `scope` (an op result or a block argument)."""
    for op in scope.walk():
        for result in op.results:
            if result.name_hint == hint:
                return result
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if arg.name_hint == hint:
                        return arg
    raise LookupError(hint)


def named(op: Operation, prefix: str) -> bool:
    """Whether `op` defines a value named `prefix` (or `prefix_N`, the printer's numbering of repeats)."""
    return any(r.name_hint is not None and (r.name_hint == prefix or r.name_hint.startswith(prefix + "_"))
               for r in op.results)


def score_maps(module: Operation) -> list[cuir.MapOp]:
    """The maps over score tiles (those placed at a tile origin: score_mod and mask), in program order."""
    return [op for op in module.walk() if isinstance(op, cuir.MapOp) and len(op.origin) > 0]


def score_gemm(scope: Operation) -> cuir.GemmAsyncOp:
    """The one S = Q K^T (`abt`) gemm_async directly in `scope`'s block."""
    (gemm,) = [op for op in scope.body.block.ops if isinstance(op, cuir.GemmAsyncOp) and op.layout.data == "abt"]
    return gemm


def waits_for(token: SSAValue) -> cuir.GemmWaitOp:
    (wait,) = [use.operation for use in token.uses if isinstance(use.operation, cuir.GemmWaitOp)]
    return wait


def is_constant(value: SSAValue, literal) -> bool:
    return isinstance(value.owner, arith.ConstantOp) and value.owner.value.value.data == literal


def constants(scope: Operation, literal) -> list[arith.ConstantOp]:
    return [
        op
        for op in scope.walk()
        if isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr | FloatAttr)
        and op.value.value.data == literal
    ]


# ----------------------------------------------------------------------------
# Editing ops
# ----------------------------------------------------------------------------


def erase(op: Operation) -> None:
    op.detach()
    op.erase()


def bypass(op: Operation, operand: int = 0) -> None:
    """Drop `op`, its uses reading its `operand`-th operand instead."""
    op.results[0].replace_all_uses_with(op.operands[operand])
    erase(op)


def move_before(op: Operation, anchor: Operation) -> None:
    op.detach()
    anchor.parent_block().insert_op_before(op, anchor)


def replace_operand(op: Operation, hint: str, new: SSAValue) -> None:
    index = [_hint(operand) for operand in op.operands].index(hint)
    op.operands[index] = new


def set_last_operand(op: Operation, new: SSAValue) -> None:
    op.operands[len(op.operands) - 1] = new


def replace_op(op: Operation, new: Operation) -> None:
    op.parent_block().insert_op_before(new, op)
    for old_result, new_result in zip(op.results, new.results):
        old_result.replace_all_uses_with(new_result)
    erase(op)


def set_constant(op: arith.ConstantOp, literal) -> None:
    kind = FloatAttr if isinstance(op.value, FloatAttr) else IntegerAttr
    replace_op(op, arith.ConstantOp(kind(literal, op.value.type)))


def set_predicate(op: arith.CmpiOp, predicate: str) -> None:
    replace_op(op, arith.CmpiOp(op.lhs, op.rhs, predicate))


def index_constant(op: Operation, literal: int) -> SSAValue:
    """A new index constant placed before `op`."""
    constant = arith.ConstantOp(IntegerAttr(literal, IndexType()))
    op.parent_block().insert_op_before(constant, op)
    return constant.result


# ----------------------------------------------------------------------------
# Hopper reference (sm90): pipeline counters, phases, waits, arrives, stages
# ----------------------------------------------------------------------------


def producer_kv_counter_reset_per_tile(module):
    """The producer starts every work tile's kv loop at count 0."""
    loop = only(worker(module, "producer"), "scf.for", "count")
    replace_operand(loop, "count", index_constant(loop, 0))


def consumer_kv_counter_reset_per_tile(module):
    """The consumer carries count 0, not its kv count, into the next work tile."""
    end = tile_body(module).last_op
    end.operands[2] = index_constant(end, 0)  # (store group, tile count, kv count)


def q_full_wait_constant_parity(module):
    """The consumer waits for Q with parity 0 on every work tile."""
    wait = only(worker(module, "consumer"), "cuir.mbarrier_wait", "q_full")
    set_last_operand(wait, index_constant(wait, 0))


def q_empty_wait_constant_parity(module):
    """The producer waits for a free Q buffer with the first tile's parity on every tile."""
    wait = only_in_block(tile_body(module, "producer"), "cuir.mbarrier_wait")
    set_last_operand(wait, index_constant(wait, 1))


def k_full_wait_constant_parity(module):
    """The kv loop waits for K with parity 0, whatever round the stage is in."""
    wait = only(loop_body(module), "cuir.mbarrier_wait", "k_full")
    set_last_operand(wait, index_constant(wait, 0))


def k_empty_wait_wrong_parity(module):
    """The producer waits for a free K stage with the full parity (not its complement)."""
    wait = only(worker(module, "producer"), "cuir.mbarrier_wait", "k_empty")
    replace_operand(wait, "free_parity", value(worker(module, "producer"), "parity"))


def k_full_wait_dropped(module):
    erase(only(loop_body(module), "cuir.mbarrier_wait", "k_full"))


def v_full_wait_dropped(module):
    erase(only(loop_body(module), "cuir.mbarrier_wait", "v_full"))


def v_empty_wait_dropped(module):
    erase(only(worker(module, "producer"), "cuir.mbarrier_wait", "v_empty"))


def k_empty_arrive_dropped(module):
    erase(only(loop_body(module), "cuir.mbarrier_arrive", "k_empty"))


def last_v_release_before_gemm_wait(module):
    """The last kv tile's V stage is released before the P V GEMM reading it has
    completed; the producer's next work tile refills it."""
    body = tile_body(module)
    last_pv = [op for op in body.ops if isinstance(op, cuir.GemmAsyncOp)][-1]
    releases = [op for op in body.ops if isinstance(op, cuir.MbarrierArriveOp) and _hint(op.operands[0]) == "v_empty"]
    move_before(releases[-1], waits_for(last_pv.token))


def v_empty_released_one_stage_early(module):
    """Once P V_{j-1} retired, step j releases V_j's stage (the count's) instead of V_{j-1}'s: the producer
    refills it while the next P V still has to read it."""
    loop = loop_body(module)
    release = only(loop, "cuir.mbarrier_arrive", "v_empty")
    (stage,) = [operand for operand in release.operands if _hint(operand) and _hint(operand).startswith("stage")]
    (k_wait,) = ops(loop, "cuir.mbarrier_wait", "k_full")
    replace_operand(release, _hint(stage), k_wait.operands[1])


def q_empty_arrive_at_tile_start(module):
    """The consumer frees the Q buffer before its GEMMs have read it."""
    consumer = worker(module, "consumer")
    arrive = only(consumer, "cuir.mbarrier_arrive", "q_empty")
    move_before(arrive, only(consumer, "cuir.mbarrier_wait", "q_full").next_op)


def q_empty_arrive_dropped(module):
    erase(only(worker(module, "consumer"), "cuir.mbarrier_arrive", "q_empty"))


def score_gemm_wait_dropped(module):
    erase(waits_for(score_gemm(loop_body(module)).token))


def store_wait_group_dropped(module):
    """The epilogue overwrites the O staging tile while the previous TMA store reads it."""
    erase(only(worker(module, "consumer"), "cuir.wait_group", "store_group"))


def fence_before_store_dropped(module):
    erase(only(worker(module, "consumer"), "cuir.fence_async_shared"))


def k_expect_tx_half(module):
    expect = only(worker(module, "producer"), "cuir.mbarrier_expect_tx", "k_full")
    expect.tx_bytes = IntegerAttr(expect.tx_bytes.value.data // 2, expect.tx_bytes.type)


def score_gemm_reads_previous_stage(module):
    """S = Q K^T reads the K stage of the previous kv tile (the one P V reads V from)."""
    loop = loop_body(module)
    gemm = score_gemm(loop)
    (pv,) = [op for op in loop.body.block.ops if isinstance(op, cuir.GemmAsyncOp) and op is not gemm]
    gemm.operands[list(gemm.operands).index(gemm.rhs_stage)] = pv.rhs_stage


def accumulator_rescale_dropped(module):
    """O is not rescaled by exp(m_old - m_new) when the running max grows."""
    block = loop_body(module).body.block
    (pv,) = [op for op in block.ops if isinstance(op, cuir.GemmAsyncOp) and op.layout.data == "ab"]
    (rescale,) = [op for op in block.ops if isinstance(op, cuir.MapOp) and op.inputs[0] == pv.results[0]]
    bypass(rescale)


def normalization_dropped(module):
    """O is stored without dividing by the row sum l."""
    bypass(only(worker(module, "consumer"), "cuir.map", "inverse"))


def lse_without_row_max(module):
    body = only(worker(module, "consumer"), "cuir.map", result="row_lse").body.block
    bypass(only_in_block(body, "arith.addf"), 1)


def log2e_wrong(module):
    """exp2(x * scale * 1.4427) becomes exp2(x * scale * 1.44): a slightly wrong softmax temperature."""
    (log2e,) = [op for op in worker(module, "consumer").walk()
                if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr)
                and abs(op.value.value.data - 1.4426950408889634) < 1e-6]
    set_constant(log2e, 1.44)


def kv_bound_check_off_by_one(module):
    """The loop's bounds map keeps column seqlen_kv (a zero-filled row of K)."""
    (bounds,) = score_maps(loop_body(module))
    kv_idx = bounds.body.block.args[2]
    (compare,) = [op for op in ops(bounds, "arith.cmpi") if op.operands[0] is kv_idx]
    set_predicate(compare, "sgt")


def gqa_head_mapping_wrong(module):
    """kv head = head % (HQ / HKV) instead of head / (HQ / HKV), in producer."""
    divide = only(worker(module, "producer"), "arith.divsi", result="kv_head")
    replace_op(divide, arith.RemSIOp(divide.lhs, divide.rhs))


def softmax_scale_dropped_in_loop(module):
    """The loop's exp2 map forgets the folded scale: exp2(s - max * scale_log2)."""
    (probabilities,) = [op for op in loop_body(module).body.block.ops
                        if isinstance(op, cuir.MapOp) and any(isinstance(i, math.Exp2Op) for i in op.body.walk())
                        and isinstance(op.inputs[0].type, cuir.TileType)]
    bypass(only_in_block(probabilities.body.block, "arith.mulf"))


def ping_pong_sync_dropped(module):
    """The loop's GEMMs skip the turn-taking named barrier of the two consumer groups."""
    erase(only(loop_body(module), "cuir.named_barrier_sync"))


def _after(block, name: str, anchor_name: str) -> Operation:
    """The first op called `name` after the one op called `anchor_name` in `block`."""
    ops_in_block = list(block.ops)
    anchor = ops_in_block.index(only_in_block(block, anchor_name))
    return next(op for op in ops_in_block[anchor + 1:] if op.name == name)


def first_score_gemm_fence_dropped(module):
    """A tile's first S = Q K^T issues with no wgmma.fence after the last tile's epilogue read its registers."""
    erase([op for op in tile_body(module).ops if isinstance(op, cuir.GemmFenceOp)][0])


def loop_gemm_fence_dropped(module):
    """The kv step's GEMMs issue with no wgmma.fence after the softmax wrote P and rescaled O."""
    erase(only_in_block(loop_body(module).body.block, "cuir.gemm_fence"))


def o_staged_before_the_store_wait_reaches_every_warp(module):
    """The epilogue's warps write the O staging tile once the issuing thread has waited for the previous TMA
    store, with no barrier of the warp group telling them so."""
    erase(_after(tile_body(module), "cuir.named_barrier_sync", "cuir.wait_group"))


def o_stored_before_every_warp_staged_it(module):
    """The TMA store is issued with no barrier of the warp group after its warps wrote the staging tile."""
    erase(_after(tile_body(module), "cuir.named_barrier_sync", "cuir.fence_async_shared"))


def last_store_never_waited(module):
    """The consumer ends while its last TMA store still reads the O staging tile."""
    erase(only_in_block(worker(module, "consumer").body.block, "cuir.wait_group"))


def row_offset_floored_at_zero(module):
    """The kv step's exp2 offset is max(m, 0) instead of max(m, -FLT_MAX): rows whose scores all lie far below
    0 underflow to P = 0."""
    block = loop_body(module).body.block
    (offset,) = [op for op in block.ops if isinstance(op, cuir.MapOp)
                 and isinstance(op.inputs[0].type, cuir.RowVectorType)
                 and any(isinstance(inner, arith.NegfOp) for inner in op.body.walk())]
    (floor,) = constants(offset, -3.4028234663852886e38)
    set_constant(floor, 0.0)


def k_full_parity_unmasked(module):
    """The kv step waits on K with parity count / 2 instead of its low bit (PTX: a parity is 0 or 1)."""
    (wait,) = [op for op in loop_body(module).body.block.ops
               if isinstance(op, cuir.MbarrierWaitOp) and op.barrier.name_hint == "k_full"]
    bypass(wait.parity.owner)


def epilogue_barrier_shared_by_both_groups(module):
    """Both consumer groups stage O behind named barrier 3, 128 threads each: their warps may meet in one
    generation."""
    block = tile_body(module)
    barrier_id = _after(block, "cuir.named_barrier_sync", "cuir.wait_group").barrier_id
    bypass(barrier_id.owner, 1)


# ----------------------------------------------------------------------------
# Ampere reference (sm80)
# ----------------------------------------------------------------------------


def sm80_kv_loop(module) -> Operation:
    """The mma worker's kv loop (the scf.for that carries the softmax state)."""
    (loop,) = [op for op in ops(worker(module, "mma"), "scf.for") if len(op.results) > 1]
    return loop


def sm80_loop_wait_groups(module) -> tuple[Operation, Operation]:
    """The kv loop's two cp.async waits, in program order: for K_j (before S = Q K^T), for V_j (before P V)."""
    k_wait, v_wait = [op for op in sm80_kv_loop(module).body.block.ops if isinstance(op, cuir.WaitGroupOp)]
    return k_wait, v_wait


def sm80_v_wait_group_dropped(module):
    erase(sm80_loop_wait_groups(module)[1])


def sm80_k_wait_group_dropped(module):
    erase(sm80_loop_wait_groups(module)[0])


def sm80_k_read_before_every_thread_copied_it(module):
    """The kv loop reads K_j right after the wait for its own cp.async part, with no __syncthreads: a warp may
    read rows another thread's copy has not landed yet."""
    erase(next(op for op in sm80_kv_loop(module).body.block.ops if isinstance(op, cuir.BarrierOp)))


def sm80_next_copies_before_every_warp_read_v(module):
    """The kv loop ends with no __syncthreads: the next step's cp.async overwrites the V stage a slower warp
    still loads."""
    erase([op for op in sm80_kv_loop(module).body.block.ops if isinstance(op, cuir.BarrierOp)][-1])


def sm80_o_copied_out_before_every_warp_staged_it(module):
    """The epilogue copies the O tile staged in shared memory out with no __syncthreads after the warps'
    stores."""
    tile = only(worker(module, "mma"), "cuir.for_each_tile").body.block
    erase([op for op in tile.ops if isinstance(op, cuir.BarrierOp)][-1])


def sm80_kv_tiles_rounded_down(module):
    """The number of kv tiles (the kv loop's bound, ceil(seqlen_k / 64)) becomes seqlen_k / 64, dropping the
    partial last tile."""
    count = sm80_kv_loop(module).ub.owner
    assert isinstance(count, arith.DivSIOp), count
    count.operands[0] = value(worker(module, "mma"), "seqlen_k")


def sm80_kv_loop_capped_at_64_tiles(module):
    """The kv loop stops after 64 tiles (its bound min(ceil(seqlen_k / 64), 64): a constant of the kernel taken
    for a count of tiles), dropping the keys past 4096, longer than every critical length (up to 257)."""
    loop = sm80_kv_loop(module)
    capped = arith.MinSIOp(loop.ub, index_constant(loop, 64))
    loop.parent_block().insert_op_before(capped, loop)
    loop.operands[1] = capped.result


def consumer_q_tile_capped_at_128(module):
    """The consumers take the work tile's first row from its query tile index capped at 128 (a constant of the
    kernel taken for a count of query tiles): tiles past the 129th compute and write the 129th's rows, past every
    critical length (up to 257 rows)."""
    (first_row,) = ops(worker(module, "consumer"), "arith.muli", result="first_row")
    q_tile = first_row.operands[0]
    capped = arith.MinSIOp(q_tile, index_constant(first_row, 128))
    first_row.parent_block().insert_op_before(capped, first_row)
    first_row.operands[0] = capped.result


# ----------------------------------------------------------------------------
# Transferred kernels: score and mask code, bounds, captured tensors
# ----------------------------------------------------------------------------


def softcap_30_to_35(module):
    for constant in constants(module, 30.0):
        set_constant(constant, 35.0)


def prefix_400_to_399(module):
    """The mask constant of the score maps (not the kv bounds) is off by one."""
    for score_map in score_maps(module):
        for constant in constants(score_map, 400):
            set_constant(constant, 399)


def prefix_kv_bound_off_by_one(module):
    """The last key of the prefix (256) becomes 255 in the kv bounds: kv tile 2
    (keys 256..383) is skipped by query tiles before it."""
    for constant in constants(module, 256):
        set_constant(constant, 255)


def causal_mask_excludes_diagonal(module):
    """q_idx >= kv_idx becomes q_idx > kv_idx (in the maps that apply the mask): the comparison of the two
    indices becomes strict."""
    strict = {"sle": "slt", "sge": "sgt", "ule": "ult", "uge": "ugt"}
    for score_map in score_maps(module):
        indices = set(score_map.body.block.args[1:])
        for compare in ops(score_map, "arith.cmpi"):
            if set(compare.operands) == indices:
                set_predicate(compare, strict[arith.CMPI_COMPARISON_OPERATIONS[compare.predicate.value.data]])


def mask_selects(module) -> list[Operation]:
    """The selects of the score maps that apply mask_mod (masked entries -inf)."""
    return [op for m in score_maps(module) for op in ops(m, "arith.select") if named(op, "masked")]


def sliding_window_mask_dropped(module):
    """The last score map that applies the mask (on the Ampere lift: its mask branch's) keeps every key."""
    bypass(mask_selects(module)[-1], 1)


def masked_value_zero(module):
    """Masked scores are set to 0 instead of -inf (they still get weight)."""
    for select in mask_selects(module):
        set_constant(select.operands[2].owner, 0.0)


def sigmoid_score_mod_dropped(module):
    for score_map in score_maps(module):
        for modified in [op for op in ops(score_map, "arith.addf") if named(op, "modified")]:
            bypass(modified)


def relu_score_mod_dropped(module):
    for score_map in score_maps(module):
        for modified in [op for op in ops(score_map, "arith.subf") if named(op, "modified")]:
            bypass(modified)


def document_id_read_at_kv_index(module):
    """document_id[q_idx] is read as document_id[kv_idx]: every key is in the query's document."""
    for score_map in score_maps(module):
        q_idx, kv_idx = score_map.body.block.args[1:]
        for gather in ops(score_map, "cuir.gather"):
            if q_idx in gather.operands:
                gather.operands[list(gather.operands).index(q_idx)] = kv_idx


def alibi_slope_of_head_zero(module):
    """alibi_slopes[h] is read at head 0 for every head."""
    for score_map in score_maps(module):
        for gather in ops(score_map, "cuir.gather", "alibi_slopes"):
            gather.operands[1] = index_constant(gather, 0)


def gathered_from(value: SSAValue) -> str | None:
    """The table an index read of `value` (an index_cast of a cuir.gather) comes from, else None."""
    cast = value.owner
    if not isinstance(cast, arith.IndexCastOp) or not isinstance(cast.input.owner, cuir.GatherOp):
        return None
    return cast.input.owner.source.name_hint


def block_lists_end_before_full_tiles(module):
    """Every role's kv range over block lists ends after the partial tiles: the full ones are never visited."""
    for add in ops(module, "arith.addi"):
        if [gathered_from(operand) for operand in add.operands] == ["kv_num_blocks", "full_kv_num_blocks"]:
            bypass(add, 0)


def first_kv_tile_read_from_the_partial_list(module):
    """Every role's first kv tile of a work tile is read from the partial list even where that lists none (the
    work tile starts on a full kv tile): the list's padding instead of the first full tile. The spec's documents
    start no work tile on a full tile past kv tile 0; the verifier's tile-aligned captured values do."""
    for select in ops(module, "arith.select"):
        arms = select.operands[1:]
        if [gathered_from(arm) for arm in arms] != ["kv_indices", "full_kv_indices"]:
            continue
        if isinstance(arms[0].owner.input.owner.operands[-1].owner, arith.ConstantOp):  # the peeled first step
            bypass(select, 1)


def window_empty_tile_test_off_by_one(module):
    """The sliding window's (100 keys) empty-tile test, q_first <= seqlen_kv + 98, loses its last query: a work
    tile starting at seqlen_kv + 98 is skipped though that query sees the last key. Only SKV = 128 - 98 = 30
    with SQ past 128 shows it."""
    for constant in constants(module, 98):
        set_constant(constant, 97)


def empty_row_guard_dropped(module):
    """O = acc / l without the l == 0 guard: rows a score_mod masks fully become NaN."""
    inverse = only(worker(module, "consumer"), "cuir.map", result="inverse").body.block
    bypass(only_in_block(inverse, "arith.select"), 1)


MUTANTS = (
    Mutant("producer kv counter reset per tile", "sm90", None, producer_kv_counter_reset_per_tile),
    Mutant("consumer kv counter reset per tile", "sm90", None, consumer_kv_counter_reset_per_tile),
    Mutant("q_full wait with constant parity", "sm90", None, q_full_wait_constant_parity),
    Mutant("q_empty wait with constant parity", "sm90", None, q_empty_wait_constant_parity),
    Mutant("k_full wait with constant parity", "sm90", None, k_full_wait_constant_parity),
    Mutant("k_empty wait with the full parity", "sm90", None, k_empty_wait_wrong_parity),
    Mutant("k_full wait dropped", "sm90", None, k_full_wait_dropped),
    Mutant("v_full wait dropped", "sm90", None, v_full_wait_dropped),
    Mutant("v_empty wait dropped", "sm90", None, v_empty_wait_dropped),
    Mutant("k_empty arrive dropped", "sm90", None, k_empty_arrive_dropped),
    Mutant("last V stage released before its gemm wait", "sm90", None, last_v_release_before_gemm_wait),
    Mutant("v stage released one stage early", "sm90", None, v_empty_released_one_stage_early),
    Mutant("q_empty arrive at tile start", "sm90", None, q_empty_arrive_at_tile_start),
    Mutant("q_empty arrive dropped", "sm90", None, q_empty_arrive_dropped),
    Mutant("score gemm wait dropped", "sm90", None, score_gemm_wait_dropped),
    Mutant("store wait_group dropped", "sm90", None, store_wait_group_dropped),
    Mutant("fence before TMA store dropped", "sm90", None, fence_before_store_dropped),
    Mutant("K expect_tx bytes halved", "sm90", None, k_expect_tx_half),
    Mutant("score gemm reads the previous K stage", "sm90", None, score_gemm_reads_previous_stage),
    Mutant("accumulator rescale dropped", "sm90", None, accumulator_rescale_dropped),
    Mutant("normalization dropped", "sm90", None, normalization_dropped),
    Mutant("LSE without the row max", "sm90", None, lse_without_row_max),
    Mutant("log2(e) constant changed", "sm90", None, log2e_wrong),
    Mutant("kv bound check off by one", "sm90", None, kv_bound_check_off_by_one),
    Mutant("GQA head mapping divui -> remui", "sm90", None, gqa_head_mapping_wrong),
    Mutant("softmax scale dropped in the kv loop", "sm90", None, softmax_scale_dropped_in_loop),
    Mutant("ping-pong named barrier sync dropped", "sm90", None, ping_pong_sync_dropped),
    Mutant("a tile's first wgmma fence dropped", "sm90", None, first_score_gemm_fence_dropped),
    Mutant("the kv step's wgmma fence dropped", "sm90", None, loop_gemm_fence_dropped),
    Mutant("O staged before the store wait reaches every warp", "sm90", None,
           o_staged_before_the_store_wait_reaches_every_warp),
    Mutant("O stored before every warp staged it", "sm90", None, o_stored_before_every_warp_staged_it),
    Mutant("last TMA store never waited", "sm90", None, last_store_never_waited),
    Mutant("exp2 offset floored at 0", "sm90", None, row_offset_floored_at_zero),
    Mutant("k_full wait parity not masked to its low bit", "sm90", None, k_full_parity_unmasked),
    Mutant("epilogue barrier shared by both consumer groups", "sm90", None, epilogue_barrier_shared_by_both_groups),
    Mutant("sm80 V wait_group dropped", "sm80", None, sm80_v_wait_group_dropped),
    Mutant("sm80 K wait_group dropped", "sm80", None, sm80_k_wait_group_dropped),
    Mutant("sm80 kv tile count rounded down", "sm80", None, sm80_kv_tiles_rounded_down),
    Mutant("sm80 kv loop capped at 64 tiles", "sm80", None, sm80_kv_loop_capped_at_64_tiles),
    Mutant("consumer q tile capped at 128", "sm90", None, consumer_q_tile_capped_at_128),
    Mutant("sm80 K read before every thread copied it", "sm80", None, sm80_k_read_before_every_thread_copied_it),
    Mutant("sm80 next copies before every warp read V", "sm80", None, sm80_next_copies_before_every_warp_read_v),
    Mutant("sm80 O copied out before every warp staged it", "sm80", None,
           sm80_o_copied_out_before_every_warp_staged_it),
    Mutant("softcap 30 -> 35", "sm90", mutation_spec("softcap30"), softcap_30_to_35),
    Mutant("prefix 400 -> 399 in the mask", "sm90", mutation_spec("prefix_lm400"), prefix_400_to_399),
    Mutant(
        "prefix kv bound 256 -> 255",
        "sm90",
        mutation_spec("prefix_lm257"),
        prefix_kv_bound_off_by_one,
    ),
    Mutant(
        "causal mask excludes the diagonal",
        "sm90",
        example_spec("causal"),
        causal_mask_excludes_diagonal,
    ),
    Mutant(
        "sliding window mask dropped",
        "sm80",
        example_spec("sliding_window"),
        sliding_window_mask_dropped,
    ),
    Mutant("masked scores 0 instead of -inf", "sm90", example_spec("sliding_window"), masked_value_zero),
    Mutant("window empty-tile test off by one", "sm90", example_spec("sliding_window"),
           window_empty_tile_test_off_by_one),
    Mutant("sigmoid score_mod dropped", "sm90", example_spec("sigmoid"), sigmoid_score_mod_dropped),
    Mutant("relu score_mod dropped", "sm90", mutation_spec("relu_shifted"), relu_score_mod_dropped),
    Mutant(
        "document_id read at the kv index",
        "sm90",
        example_spec("document_mask"),
        document_id_read_at_kv_index,
    ),
    Mutant("block lists' full tiles never visited", "sm90", example_spec("document_mask"),
           block_lists_end_before_full_tiles),
    Mutant("first kv tile read from the partial list", "sm90", example_spec("document_mask"),
           first_kv_tile_read_from_the_partial_list),
    Mutant(
        "alibi slope of head 0 for every head",
        "sm80",
        example_spec("alibi"),
        alibi_slope_of_head_zero,
    ),
    Mutant(
        "empty-row guard of the normalization dropped",
        "sm90",
        mutation_spec("masked_rows"),
        empty_row_guard_dropped,
    ),
)
