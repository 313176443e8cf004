"""Compile CuIR blocks once into lists of step closures.

Each op becomes a `Step`: a closure over the op's operands and results that
runs against a `Frame` (the SSA values of one warp-group instance, its
program and the instance itself). Steps of ops that can block or that
interleave with other instances (synchronization, async ops, and region ops
containing them) are generator functions: they yield a wait object to block
on, or None to let the scheduler switch instances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from cubridge.diagnostics import CuBridgeError, describe_location
from cubridge.dialect.types import REGISTER_VALUE_TYPES, TileType
from cubridge.interpreter.report import where


class Frame:
    """What a step runs against: SSA values, the program, the executing instance."""

    __slots__ = ("values", "program", "thread")

    def __init__(self, values: dict, program, thread):
        self.values = values
        self.program = program
        self.thread = thread


@dataclass(frozen=True)
class Step:
    """`run(frame)` executes the op; if `suspends`, it returns a generator to drive."""

    run: Callable
    suspends: bool = False


Handler = Callable[[Operation, "Compiler"], Step]
HANDLERS: dict[type[Operation], Handler] = {}

# ops whose register operands are passed on, not read (carried values)
PASS_THROUGH: set[type[Operation]] = set()
# ops whose `acc` operand may still be in flight: async MMAs chain on one accumulator
CHAINS_ACCUMULATOR: set[type[Operation]] = set()
# ops that touch no register of the register tiles they carry (control flow) or that account for their own
# register accesses (the wgmma ops): every other op with a register tile operand or result accesses registers
# that the next wgmma must be fenced from
REGISTER_NEUTRAL: set[type[Operation]] = set()


def handles(*op_types: type[Operation]):
    """Register the decorated function as the step builder for `op_types`."""

    def register(builder: Handler) -> Handler:
        for op_type in op_types:
            HANDLERS[op_type] = builder
        return builder

    return register


def region_step(run: Callable, body_suspends: bool) -> Step:
    """The step of a region op whose generator `run` drives its body: suspending
    if the body can block, else a plain step that drives the generator itself."""
    if body_suspends:
        return Step(run, True)

    def run_through(frame: Frame) -> None:
        for _ in run(frame):
            pass

    return Step(run_through)


def carried_loop_step(
    body: CompiledBlock,
    index_args: Sequence[SSAValue],
    carried: Sequence[SSAValue],
    inits: Sequence[SSAValue],
    results: Sequence[SSAValue],
    iterations: Callable[[Frame], Iterable[Sequence]],
) -> Step:
    """The step of a loop with carried values (scf.for, cuir.for_each_tile).

    Each iteration binds `index_args` to the next tuple of `iterations(frame)` and
    the carried arguments to the values the body last yielded (the inits at first);
    the loop's results are the values yielded by the last iteration.
    """
    index_args, carried, inits, results = map(list, (index_args, carried, inits, results))

    def run(frame: Frame):
        values = frame.values
        current = [values[v] for v in inits]
        for indices in iterations(frame):
            for arg, index in zip(index_args, indices):
                values[arg] = index
            for arg, value in zip(carried, current):
                values[arg] = value
            yield from body.run_suspending(frame)
            current = body.results(frame)
        for result, value in zip(results, current):
            values[result] = value

    return region_step(run, body.suspends)


class CompiledBlock:
    """The steps of a block, and the values its terminator yields."""

    def __init__(self, block: Block, compiler: Compiler):
        ops = list(block.ops)
        terminator = ops[-1] if ops and ops[-1].has_trait(IsTerminator) else None
        body = ops[:-1] if terminator is not None else ops
        self.steps = [compiler.compile_op(op) for op in body]
        self.yielded: tuple[SSAValue, ...] = tuple(terminator.operands) if terminator else ()
        self.suspends = any(step.suspends for step in self.steps)

    def run(self, frame: Frame) -> None:
        for step in self.steps:
            step.run(frame)

    def run_suspending(self, frame: Frame) -> Iterator:
        for step in self.steps:
            if step.suspends:
                yield from step.run(frame)
            else:
                step.run(frame)

    def results(self, frame: Frame) -> list:
        values = frame.values
        return [values[v] for v in self.yielded]


class Compiler:
    """Builds steps for ops through the handler table."""

    def compile_block(self, block: Block) -> CompiledBlock:
        return CompiledBlock(block, self)

    def compile_op(self, op: Operation) -> Step:
        builder = HANDLERS.get(type(op))
        if builder is None:
            raise CuBridgeError(f"the executor does not support '{op.name}'", describe_location(op))
        step = builder(op, self)
        if type(op) not in REGISTER_NEUTRAL and any(isinstance(v.type, TileType) for v in (*op.operands, *op.results)):
            step = _noting_register_access(op, step)
        register_reads = [
            v
            for v in _read_operands(op)
            if isinstance(v.type, REGISTER_VALUE_TYPES)
        ]
        if not register_reads:
            return step
        return _check_in_flight_reads(op, register_reads, step)


def _read_operands(op: Operation) -> list[SSAValue]:
    if type(op) in PASS_THROUGH:
        return []
    chained = op.acc if type(op) in CHAINS_ACCUMULATOR else None
    return [v for v in op.operands if v is not chained]


def _noting_register_access(op: Operation, step: Step) -> Step:
    """Wrap `step` so that its instance notes an access to register tiles since its last cuir.gemm_fence."""
    inner = step.run
    if step.suspends:

        def run_suspending(frame: Frame):
            frame.thread.access_registers(op)
            return inner(frame)

        return Step(run_suspending, True)

    def run(frame: Frame) -> None:
        frame.thread.access_registers(op)
        inner(frame)

    return Step(run)


def _check_in_flight_reads(op: Operation, reads: list[SSAValue], step: Step) -> Step:
    """Wrap `step` so that reading a tile still computed by a gemm_async is reported."""

    def check(frame: Frame) -> None:
        in_flight = frame.thread.in_flight_tiles
        for value in reads:
            gemm = in_flight.get(id(frame.values[value]))
            if gemm is None:
                continue
            frame.program.log.race(
                "race",
                op,
                f"{where(op)} reads the result of {where(gemm.op)} before its cuir.gemm_wait",
            )

    inner = step.run
    if step.suspends:

        def run_suspending(frame: Frame):
            if frame.thread.in_flight_tiles:
                check(frame)
            return inner(frame)

        return Step(run_suspending, True)

    def run(frame: Frame) -> None:
        if frame.thread.in_flight_tiles:
            check(frame)
        inner(frame)

    return Step(run)
