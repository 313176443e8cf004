"""scf: loops and conditionals on Python scalars. A region that contains a
blocking op makes its parent op a suspending step."""

from __future__ import annotations

from xdsl.dialects import scf

from cubridge.interpreter.compiler import (
    PASS_THROUGH,
    REGISTER_NEUTRAL,
    Compiler,
    Frame,
    Step,
    carried_loop_step,
    handles,
    region_step,
)
from cubridge.interpreter.report import KernelFault

PASS_THROUGH.add(scf.ForOp)
REGISTER_NEUTRAL.update({scf.ForOp, scf.IfOp, scf.YieldOp})


@handles(scf.ForOp)
def for_loop(op: scf.ForOp, compiler: Compiler) -> Step:
    induction, *carried = op.body.block.args
    lower, upper, stride = op.lb, op.ub, op.step

    def iterations(frame: Frame):
        values = frame.values
        if values[stride] <= 0:  # `j < end; j += step` would never end
            raise KernelFault(op, f"scf.for step {values[stride]}: a loop's step must be positive")
        return ((index,) for index in range(values[lower], values[upper], values[stride]))

    return carried_loop_step(
        compiler.compile_block(op.body.block), (induction,), carried, op.iter_args, op.results, iterations
    )


@handles(scf.IfOp)
def if_then_else(op: scf.IfOp, compiler: Compiler) -> Step:
    then_body = compiler.compile_block(op.true_region.block)
    else_body = compiler.compile_block(op.false_region.block) if op.false_region.blocks else None
    condition, results = op.cond, list(op.results)

    def run(frame: Frame):
        values = frame.values
        body = then_body if values[condition] else else_body
        if body is None:
            return
        yield from body.run_suspending(frame)
        for result, value in zip(results, body.results(frame)):
            values[result] = value

    return region_step(run, then_body.suspends or (else_body is not None and else_body.suspends))
