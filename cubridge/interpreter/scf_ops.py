"""scf: loops and conditionals on Python scalars. A region that contains a
blocking op makes its parent op a suspending step."""

from __future__ import annotations

from xdsl.dialects import scf

from cubridge.interpreter.compiler import PASS_THROUGH, Compiler, Frame, Step, handles, region_step

PASS_THROUGH.add(scf.ForOp)


@handles(scf.ForOp)
def for_loop(op: scf.ForOp, compiler: Compiler) -> Step:
    body = compiler.compile_block(op.body.block)
    induction, *carried = op.body.block.args
    lower, upper, stride = op.lb, op.ub, op.step
    inits, results = list(op.iter_args), list(op.results)

    def run(frame: Frame):
        values = frame.values
        current = [values[v] for v in inits]
        for index in range(values[lower], values[upper], values[stride]):
            values[induction] = index
            for arg, value in zip(carried, current):
                values[arg] = value
            yield from body.run_suspending(frame)
            current = body.results(frame)
        for result, value in zip(results, current):
            values[result] = value

    return region_step(run, body.suspends)


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
