"""cuir: work assignment, data movement, compute and synchronization.

Each builder reads the op's structure once and returns the closure that
executes it. Ops that synchronize or start/complete asynchronous work are
suspending steps: they first yield, so that the scheduler may run another
instance (or land a TMA copy) before the op takes effect, and they yield a
wait object while they block. What completes when follows the op docs in
`cubridge.dialect.cuir`.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from cubridge.dialect import cuir
from cubridge.dialect.types import (
    ColVectorType,
    MbarrierType,
    RowVectorType,
    SharedBufferType,
    TileType,
)
from cubridge.interpreter.clocks import join
from cubridge.interpreter.compiler import (
    CHAINS_ACCUMULATOR,
    PASS_THROUGH,
    REGISTER_NEUTRAL,
    Compiler,
    Frame,
    Step,
    carried_loop_step,
    handles,
)
from cubridge.interpreter.memory import SharedBuffer
from cubridge.interpreter.numerics import rounding_for
from cubridge.interpreter.report import KernelFault, KernelTrap, where
from cubridge.interpreter.sync import BarrierWait, GemmInFlight, MbarrierStage, MbarrierWait, TmaCopy

PASS_THROUGH.add(cuir.ForEachTileOp)
CHAINS_ACCUMULATOR.add(cuir.GemmAsyncOp)
REGISTER_NEUTRAL.update({cuir.ForEachTileOp, cuir.WorkerOp, cuir.YieldOp, cuir.GemmAsyncOp, cuir.GemmWaitOp,
                         cuir.GemmFenceOp})
CTA_BARRIER_ID = 0


def _name(value: SSAValue) -> str:
    return value.name_hint or "buffer"


def _staged(op: Operation, ref: SSAValue, stage: SSAValue | None):
    """A function of the frame's values giving the selected stage of a shared buffer or mbarrier array: this
    program's, or that of the program whose allocations are `owner` (a CTA of the cluster)."""

    def select(values: dict, owner: dict | None = None):
        stages = (values if owner is None else owner)[ref]
        if isinstance(stages, SharedBuffer):
            stages = stages.stages
        if stage is None:
            return stages[0]
        index = values[stage]
        if not 0 <= index < len(stages):
            raise KernelFault(
                op, f"stage {index} of %{_name(ref)} is out of range ({len(stages)} stages)"
            )
        return stages[index]

    return select


def _indices(values: dict, operands) -> list[int]:
    return [int(values[v]) for v in operands]


# ----------------------------------------------------------------------------
# Work assignment
# ----------------------------------------------------------------------------


@handles(cuir.ProgramIdOp, cuir.ClusterRankOp)
def program_index(op: cuir.ProgramIdOp | cuir.ClusterRankOp, compiler: Compiler) -> Step:
    """The program's index in the grid, or its rank in its cluster."""
    result, in_cluster = op.result, isinstance(op, cuir.ClusterRankOp)

    def run(frame: Frame) -> None:
        frame.values[result] = frame.program.rank if in_cluster else frame.program.program_id

    return Step(run)


@handles(cuir.DimOp)
def dim(op: cuir.DimOp, compiler: Compiler) -> Step:
    tensor, axis, result = op.tensor, op.dim.value.data, op.result

    def run(frame: Frame) -> None:
        frame.values[result] = frame.values[tensor].array.shape[axis]

    return Step(run)


@handles(cuir.ForEachTileOp)
def for_each_tile(op: cuir.ForEachTileOp, compiler: Compiler) -> Step:
    return carried_loop_step(
        compiler.compile_block(op.body.block),
        op.tile_coords,
        op.carried,
        op.iter_args,
        op.res,
        lambda frame: frame.program.tiles,
    )


# ----------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------


@handles(cuir.AllocOp)
def alloc(op: cuir.AllocOp, compiler: Compiler) -> Step:
    kind, result, name = op.result.type, op.result, _name(op.result)
    if isinstance(kind, MbarrierType):
        count = kind.stages.data

        def make():
            if count == 1:
                return [MbarrierStage(f"%{name}", 0)]
            return [MbarrierStage(f"%{name}[{s}]", 0) for s in range(count)]

    else:
        assert isinstance(kind, SharedBufferType)

        def make():
            return SharedBuffer(name, kind.stages.data, kind.dims)

    def run(frame: Frame) -> None:
        frame.values[result] = make()

    return Step(run)


@handles(cuir.CopyOp)
def copy(op: cuir.CopyOp, compiler: Compiler) -> Step:
    to_shared = isinstance(op.dest.type, SharedBufferType)
    if to_shared:
        tensor, coordinates = op.source, list(op.source_indices)
        stage_of = _staged(op, op.dest, op.dest_indices[0] if op.dest_indices else None)
        dims = op.dest.type.dims
    else:
        tensor, coordinates = op.dest, list(op.dest_indices)
        stage_of = _staged(op, op.source, op.source_indices[0] if op.source_indices else None)

    def run(frame: Frame):
        yield None
        values, thread, log = frame.values, frame.thread, frame.program.log
        stage = stage_of(values)
        if to_shared:
            stage.check_write(op, thread, log)
            stage.check_spread_write(op, thread, log)
            stage.write(op, thread, values[tensor].read_tile(_indices(values, coordinates), dims))
            return
        stage.check_read(op, thread, log)
        stage.check_spread_read(op, thread, log)
        stage.record_read(op, thread)
        stage.record_spread_read(op, thread)
        values[tensor].write_tile(
            op, frame.program.program_id, _indices(values, coordinates), stage.data
        )

    return Step(run, True)


@handles(cuir.CopyAsyncOp)
def copy_async(op: cuir.CopyAsyncOp, compiler: Compiler) -> Step:
    tensor, coordinates = op.source, list(op.source_indices)
    stage_of = _staged(op, op.dest, op.dest_stage)
    dims, tile_bytes = (op.dest.type.dims[0], op.copied_columns), op.tile_bytes
    barrier_of = _staged(op, op.barrier, op.barrier_stage) if op.barrier is not None else None
    panel, multicast = op.columns is not None, op.multicast is not None

    def run(frame: Frame):
        yield None
        values, thread, program = frame.values, frame.thread, frame.program
        indices = _indices(values, coordinates)
        columns = (indices[-1], indices[-1] + dims[1]) if panel else None
        if panel and not 0 <= columns[0] <= op.dest.type.dims[1] - dims[1]:
            raise KernelFault(op, f"a panel at column {columns[0]} is not inside %{_name(op.dest)}'s "
                                  f"{op.dest.type.dims[1]} columns")
        tile = values[tensor].read_tile(indices, dims)
        if barrier_of is not None:
            for target in program.cluster if multicast else [program]:
                owner = None if target is program else target.values
                stage, barrier = stage_of(values, owner), barrier_of(values, owner)
                target.check_alive(op, thread)
                stage.check_write(op, thread, program.log, columns)
                access = stage.start_write(op, thread, f"the phase of {barrier.label} it signals completes", columns)
                program.pending_copies.append(TmaCopy(op, stage, tile, barrier, access, tile_bytes, target))
            return
        stage = stage_of(values)
        stage.check_write(op, thread, program.log)
        stage.check_spread_write(op, thread, program.log)  # cp.async: each thread copies its part
        access = stage.start_write(op, thread, "its cuir.wait_group")

        def complete() -> None:
            stage.data[...] = tile
            stage.finish_write(access, thread.epoch())
            stage.record_spread_write(op, thread)
            stage.write_through_generic_proxy(op, thread)

        thread.open_group.append((op, complete))

    return Step(run, True)


@handles(cuir.LoadOp)
def load(op: cuir.LoadOp, compiler: Compiler) -> Step:
    stage_of, result = _staged(op, op.source, op.stage), op.result

    def run(frame: Frame):
        yield None
        values, thread = frame.values, frame.thread
        stage = stage_of(values)
        stage.check_read(op, thread, frame.program.log)
        stage.check_spread_read(op, thread, frame.program.log)
        stage.record_read(op, thread)
        stage.record_spread_read(op, thread)
        values[result] = stage.data.copy()

    return Step(run, True)


@handles(cuir.StoreOp)
def store(op: cuir.StoreOp, compiler: Compiler) -> Step:
    value, dest = op.value, op.dest
    if isinstance(dest.type, SharedBufferType):
        stage_of = _staged(op, dest, op.dest_indices[0] if op.dest_indices else None)
        round_to = rounding_for(dest.type.element_type)

        def run_shared(frame: Frame):
            yield None
            values, thread = frame.values, frame.thread
            stage = stage_of(values)
            stage.check_write(op, thread, frame.program.log)
            stage.check_spread_write(op, thread, frame.program.log)
            stage.write(op, thread, round_to(values[value]))

        return Step(run_shared, True)
    coordinates = list(op.dest_indices)

    def run_global(frame: Frame) -> None:
        values = frame.values
        values[dest].write_tile(
            op, frame.program.program_id, _indices(values, coordinates), values[value]
        )

    return Step(run_global)


@handles(cuir.StoreAsyncOp)
def store_async(op: cuir.StoreAsyncOp, compiler: Compiler) -> Step:
    """A TMA store, issued by one thread of the instance, which alone waits for it (cuir.wait_group): the
    instance's other warps meet its issue and its completion only at a barrier of the warp group."""
    stage_of = _staged(op, op.source, op.source_stage)
    tensor, coordinates = op.dest, list(op.dest_indices)

    def run(frame: Frame):
        yield None
        values, thread, program = frame.values, frame.thread, frame.program
        stage = stage_of(values)
        stage.check_read(op, thread, program.log)
        stage.check_async_proxy_read(op, program.log)
        stage.check_issuer_read(op, thread, program.log)
        access = stage.start_read(op, thread, "its cuir.wait_group")
        values[tensor].write_tile(op, program.program_id, _indices(values, coordinates), stage.data)
        thread.open_group.append((op, lambda: stage.finish_issuer_read(access)))

    return Step(run, True)


@handles(cuir.CommitGroupOp)
def commit_group(op: cuir.CommitGroupOp, compiler: Compiler) -> Step:
    token = op.token

    def run(frame: Frame):
        yield None
        thread = frame.thread
        thread.groups[thread.committed] = thread.open_group
        frame.values[token] = thread.committed
        thread.committed += 1
        thread.open_group = []

    return Step(run, True)


@handles(cuir.WaitGroupOp)
def wait_group(op: cuir.WaitGroupOp, compiler: Compiler) -> Step:
    """Completes the token's group and every group committed before it."""
    token = op.token

    def run(frame: Frame):
        yield None
        thread, last = frame.thread, frame.values[token]
        for group in sorted(g for g in thread.groups if g <= last):
            for _, complete in thread.groups.pop(group):
                complete()

    return Step(run, True)


# ----------------------------------------------------------------------------
# Compute
# ----------------------------------------------------------------------------


def _product(a: np.ndarray, b: np.ndarray, layout: str) -> np.ndarray:
    return np.matmul(a, b.T if layout == "abt" else b)


@handles(cuir.GemmOp)
def gemm(op: cuir.GemmOp, compiler: Compiler) -> Step:
    lhs, rhs, acc, result = op.lhs, op.rhs, op.acc, op.result
    layout, round_to = op.layout.data, rounding_for(op.result.type.element_type)

    def run(frame: Frame) -> None:
        values = frame.values
        product = _product(values[lhs], values[rhs], layout)
        if acc is not None:
            product += values[acc]
        values[result] = round_to(product)

    return Step(run)


@handles(cuir.GemmAsyncOp)
def gemm_async(op: cuir.GemmAsyncOp, compiler: Compiler) -> Step:
    """Computes at issue; the result and the shared operands are in flight until gemm_wait."""
    layout, round_to = op.layout.data, rounding_for(op.result.type.element_type)
    acc, result, token = op.acc, op.result, op.token
    lhs_stage = _staged(op, op.lhs, op.lhs_stage) if isinstance(op.lhs.type, SharedBufferType) else None
    rhs_stage = _staged(op, op.rhs, op.rhs_stage)
    lhs = op.lhs

    def run(frame: Frame):
        yield None
        values, thread, log = frame.values, frame.thread, frame.program.log
        reads = []
        operands = []
        for stage_of in (lhs_stage, rhs_stage):
            if stage_of is None:
                operands.append(values[lhs])
                continue
            stage = stage_of(values)
            stage.check_read(op, thread, log)
            stage.check_async_proxy_read(op, log)
            reads.append((stage, stage.start_read(op, thread, "its cuir.gemm_wait")))
            operands.append(stage.data)
        _check_fenced(op, thread, log)
        product = _product(operands[0], operands[1], layout)
        if acc is not None:
            product += values[acc]
        tile = round_to(product)
        sequence = thread.issued_gemms
        thread.issued_gemms += 1
        record = GemmInFlight(op, sequence, tile, reads)
        thread.gemms.append(record)
        thread.in_flight_tiles[id(tile)] = record
        values[result] = tile
        values[token] = sequence

    return Step(run, True)


def _check_fenced(op: cuir.GemmAsyncOp, thread, log) -> None:
    """A wgmma may start only once a wgmma.fence orders the instance's register accesses before it (PTX ISA,
    wgmma.fence: before an instance's first wgmma, and between any register access and a wgmma that accesses
    the same registers; a tile's registers are not tracked, so any access counts). Consecutive wgmmas need none."""
    unfenced = thread.unfenced_registers
    if unfenced is None:
        return
    since = unfenced if isinstance(unfenced, str) else f"{where(unfenced)} accessed register tiles"
    log.race("race", op, f"{where(op)} issues with no cuir.gemm_fence since {since}")


@handles(cuir.GemmWaitOp)
def gemm_wait(op: cuir.GemmWaitOp, compiler: Compiler) -> Step:
    """Completes the token's gemm_async and every one this instance issued before it;
    gemms issued after it stay in flight (waiting again on a completed token is a no-op)."""
    token = op.token

    def run(frame: Frame):
        yield None
        thread, last = frame.thread, frame.values[token]
        pending = []
        for record in thread.gemms:
            if record.sequence > last:
                pending.append(record)
                continue
            del thread.in_flight_tiles[id(record.result)]
            for stage, access in record.reads:
                stage.finish_read(access)
        thread.gemms = pending

    return Step(run, True)


@handles(cuir.GemmFenceOp)
def gemm_fence(op: cuir.GemmFenceOp, compiler: Compiler) -> Step:
    """Orders the instance's register accesses before its next wgmma."""

    def run(frame: Frame) -> None:
        frame.thread.unfenced_registers = None

    return Step(run)


@handles(cuir.FenceAsyncSharedOp)
def fence_async_shared(op: cuir.FenceAsyncSharedOp, compiler: Compiler) -> Step:
    """Makes this instance's ordinary shared-memory writes visible to async-proxy reads."""

    def run(frame: Frame) -> None:
        thread = frame.thread
        for stage in thread.unfenced_stages:
            stage.fence(thread)
        thread.unfenced_stages.clear()

    return Step(run)


def _map_operand_shape(input_type, result_type):
    """How a map input broadcasts against the result: as is, per row, or per column."""
    if isinstance(result_type, TileType) and isinstance(input_type, RowVectorType):
        return lambda array: array[:, None]
    if isinstance(input_type, ColVectorType):
        return lambda array: array[None, :]
    return lambda array: array


def _captured_values(op: cuir.MapOp) -> list[SSAValue]:
    """Values of the enclosing scope that the map body uses."""
    inside = set(op.body.block.args)
    captured: dict[SSAValue, None] = {}
    for nested in op.body.walk():
        inside.update(nested.results)
        for region in nested.regions:
            for block in region.blocks:
                inside.update(block.args)
    for nested in op.body.walk():
        for operand in nested.operands:
            if operand not in inside:
                captured[operand] = None
    return list(captured)


@handles(cuir.MapOp)
def map_elements(op: cuir.MapOp, compiler: Compiler) -> Step:
    """Evaluates the body once, on whole arrays: scalars broadcast, indices as aranges."""
    body = compiler.compile_block(op.body.block)
    result_type, result = op.result.type, op.result
    shape = result_type.dims if isinstance(result_type, TileType) else (result_type.length.data,)
    round_to = rounding_for(result_type.element_type)
    inputs = list(op.inputs)
    scalar_args, index_args = list(op.scalar_args), list(op.index_args)
    expanders = [_map_operand_shape(v.type, result_type) for v in inputs]
    ranges = [np.arange(shape[0], dtype=np.int64)]
    if len(shape) == 2:
        ranges = [ranges[0][:, None], np.arange(shape[1], dtype=np.int64)[None, :]]
    origin = list(op.origin)
    captured = _captured_values(op)
    (yielded,) = body.yielded

    def run(frame: Frame) -> None:
        values = frame.values
        local = {v: values[v] for v in captured}
        for arg, value, expand in zip(scalar_args, inputs, expanders):
            local[arg] = expand(values[value])
        for position, (arg, indices) in enumerate(zip(index_args, ranges)):
            local[arg] = indices + values[origin[position]] if origin else indices
        body.run(Frame(local, frame.program, frame.thread))
        values[result] = round_to(np.broadcast_to(local[yielded], shape).astype(np.float32))

    return Step(run)


@handles(cuir.GatherOp)
def gather(op: cuir.GatherOp, compiler: Compiler) -> Step:
    """Reads table elements at (arrays of) coordinates; outside the table reads zero."""
    source, coordinates, result = op.source, list(op.indices), op.result

    def run(frame: Frame) -> None:
        values = frame.values
        table = values[source].array
        indices = np.broadcast_arrays(*(np.asarray(values[v]) for v in coordinates))
        inside = np.ones(indices[0].shape, dtype=bool)
        for index, size in zip(indices, table.shape):
            inside &= (index >= 0) & (index < size)
        safe = tuple(np.where(inside, index, 0) for index in indices)
        values[result] = np.where(inside, table[safe], table.dtype.type(0))

    return Step(run)


@handles(cuir.RowReduceOp)
def row_reduce(op: cuir.RowReduceOp, compiler: Compiler) -> Step:
    source, init, result = op.source, op.init, op.result
    is_max = op.kind.data == "max"
    round_to = rounding_for(op.result.type.element_type)

    def run(frame: Frame) -> None:
        values = frame.values
        tile = values[source]
        if is_max:
            reduced = tile.max(axis=1)
            if init is not None:
                reduced = np.maximum(reduced, values[init])
        else:
            reduced = tile.sum(axis=1, dtype=np.float32)
            if init is not None:
                reduced = reduced + values[init]
        values[result] = round_to(reduced)

    return Step(run)


@handles(cuir.ConvertOp)
def convert(op: cuir.ConvertOp, compiler: Compiler) -> Step:
    source, result = op.source, op.result
    round_to = rounding_for(op.result.type.element_type)

    def run(frame: Frame) -> None:
        frame.values[result] = round_to(frame.values[source])

    return Step(run)


@handles(cuir.FillOp)
def fill(op: cuir.FillOp, compiler: Compiler) -> Step:
    kind, result = op.result.type, op.result
    shape = kind.dims if isinstance(kind, TileType) else (kind.length.data,)
    value = rounding_for(kind.element_type)(np.float32(op.value.value.data))

    def run(frame: Frame) -> None:
        frame.values[result] = np.full(shape, value, dtype=np.float32)

    return Step(run)


# ----------------------------------------------------------------------------
# Synchronization
# ----------------------------------------------------------------------------


def _sync_at(frame: Frame, op: Operation, barrier_id: int, threads: int):
    """Arrive at a named barrier of the program, block until its generation completes, acquire its clock."""
    yield from _wait_generation(frame, op, frame.program.named_barrier(barrier_id), threads)


def _wait_generation(frame: Frame, op: Operation, barrier, threads: int):
    """Arrive at `barrier` (a named or the cluster barrier), block until its generation completes, acquire its
    clock."""
    generation = barrier.arrive(op, frame.thread, threads, frame.program.log)
    wait = BarrierWait(op, barrier, generation)
    if not wait.ready():
        yield wait
    join(frame.thread.clock, barrier.completed_clocks[generation])
    frame.thread.warp_syncs += 1


@handles(cuir.BarrierOp)
def barrier(op: cuir.BarrierOp, compiler: Compiler) -> Step:
    """All threads of the program (named barrier 0, as __syncthreads)."""

    def run(frame: Frame):
        yield None
        yield from _sync_at(frame, op, CTA_BARRIER_ID, frame.program.threads)

    return Step(run, True)


@handles(cuir.TrapOp)
def trap(op: cuir.TrapOp, compiler: Compiler) -> Step:
    def run(frame: Frame) -> None:
        raise KernelTrap(op, "cuir.trap: the launch aborts")

    return Step(run)


@handles(cuir.ClusterBarrierOp)
def cluster_barrier(op: cuir.ClusterBarrierOp, compiler: Compiler) -> Step:
    """All threads of every program of the cluster."""

    def run(frame: Frame):
        yield None
        program = frame.program
        threads = sum(member.threads for member in program.cluster)
        yield from _wait_generation(frame, op, program.cluster_barrier, threads)

    return Step(run, True)


@handles(cuir.NamedBarrierSyncOp)
def named_barrier_sync(op: cuir.NamedBarrierSyncOp, compiler: Compiler) -> Step:
    barrier_id, threads = op.barrier_id, op.thread_count.value.data

    def run(frame: Frame):
        yield None
        yield from _sync_at(frame, op, frame.values[barrier_id], threads)

    return Step(run, True)


@handles(cuir.NamedBarrierArriveOp)
def named_barrier_arrive(op: cuir.NamedBarrierArriveOp, compiler: Compiler) -> Step:
    barrier_id, threads = op.barrier_id, op.thread_count.value.data

    def run(frame: Frame):
        yield None
        barrier = frame.program.named_barrier(frame.values[barrier_id])
        barrier.arrive(op, frame.thread, threads, frame.program.log)

    return Step(run, True)


@handles(cuir.MbarrierInitOp)
def mbarrier_init(op: cuir.MbarrierInitOp, compiler: Compiler) -> Step:
    array, count = op.barrier, op.count.value.data

    def run(frame: Frame) -> None:
        for stage in frame.values[array]:
            stage.count = count

    return Step(run)


@handles(cuir.MbarrierArriveOp, cuir.MbarrierExpectTxOp)
def mbarrier_arrive(op: cuir.MbarrierArriveOp | cuir.MbarrierExpectTxOp, compiler: Compiler) -> Step:
    """An arrival on this program's barrier or, with `cta`, on that cluster CTA's."""
    stage_of = _staged(op, op.barrier, op.stage)
    tx_bytes = op.tx_bytes.value.data if isinstance(op, cuir.MbarrierExpectTxOp) else 0
    cta = op.cta if isinstance(op, cuir.MbarrierArriveOp) else None

    def run(frame: Frame):
        yield None
        values, thread, program = frame.values, frame.thread, frame.program
        if cta is None:
            stage_of(values).arrive(op, thread, tx_bytes, program.log)
            return
        target = program.peer(values[cta], op)
        target.check_alive(op, thread)
        if target is not program:
            target.remote_arrivals.append((op, thread, thread.epoch()))
        stage_of(values, target.values).arrive(op, thread, tx_bytes, program.log)

    return Step(run, True)


@handles(cuir.MbarrierWaitOp)
def mbarrier_wait(op: cuir.MbarrierWaitOp, compiler: Compiler) -> Step:
    """Returns once the phase of that parity (0 or 1) has completed; checks that it is
    the next phase this instance consumes of that mbarrier."""
    stage_of, parity = _staged(op, op.barrier, op.stage), op.parity

    def run(frame: Frame):
        barrier = stage_of(frame.values)
        if frame.values[parity] not in (0, 1):
            raise KernelFault(op, f"parity {frame.values[parity]}: a phase's parity is 0 or 1 (PTX ISA, "
                                  "mbarrier.try_wait.parity)")
        wait = MbarrierWait(op, barrier, frame.values[parity])
        yield wait if not wait.ready() else None
        thread = frame.thread
        observed = barrier.phase - 1
        _check_phase_order(frame, op, barrier, observed, wait.parity)
        thread.consumed_phase[barrier] = observed
        join(thread.clock, barrier.completed_clock)

    return Step(run, True)


def _check_phase_order(frame: Frame, op, barrier: MbarrierStage, observed: int, parity: int):
    thread = frame.thread
    previous = thread.consumed_phase.get(barrier)
    expected = (-1, 0) if previous is None else (previous + 1,)
    if observed in expected:
        return
    what = (
        f"{where(op)} in {thread.label} returns for phase {observed} of "
        f"{barrier.label} (parity {parity})"
    )
    if previous is not None and observed <= previous:
        message = f"{what}, which this instance already consumed; it expected phase {previous + 1}"
    else:
        message = f"{what}, skipping phase {expected[-1]}, which it never waited for"
    frame.program.log.race("wrong phase", op, message)
