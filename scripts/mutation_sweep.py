"""Every mutant of a few mutation operators over a reference kernel's CuIR, verified by the default verifier.

    python3 scripts/mutation_sweep.py sm90|sm80|sm90-pairs [--spec SPEC.py] [--jobs 2] [--timeout 240] [--operator drop ...]

sm90-pairs is the lift of the Hopper kernel's K/V pair entry point (two-CTA clusters), which has no example file.

The operators: an integer comparison one off or negated (`slt` -> `sle`, `sge`), a float comparison likewise,
an integer constant +-1 (an i1 flipped), a float constant to 0, doubled or negated, a binary op replaced by either
operand, a non-commutative op's operands swapped, a unary op by its operand, a select's arms swapped or one of
them taken, and an op with no used results (waits, arrives, fences, barriers) dropped. Each mutant is verified in
a process of its own, as `verify(module, spec)` with every default; a mutant the verifier passes is printed as
SURVIVED. A survivor either computes what the kernel computes (an equivalent mutant: the sweep cannot tell) or
is a bug the verifier misses: read it. `tests/mutation/` plants the survivors found to be bugs once the verifier
rejects them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Operation

from cubridge.diagnostics import CuBridgeError, parse_module
from cubridge.dialect import cuir_context
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import verify
from cubridge.interpreter.executor import find_kernel
from cubridge.passes.transfer import transfer_kernel

ROOT = Path(__file__).resolve().parents[1]

BINARY = {"arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remsi", "arith.andi", "arith.ori",
          "arith.xori", "arith.shli", "arith.shrsi", "arith.maxsi", "arith.minsi", "arith.mulf", "arith.addf",
          "arith.subf", "arith.divf", "arith.maxnumf", "arith.minnumf", "arith.maximumf", "arith.minimumf"}
NON_COMMUTATIVE = {"arith.subi", "arith.divsi", "arith.remsi", "arith.shli", "arith.shrsi", "arith.subf",
                   "arith.divf"}
UNARY = {"arith.negf", "math.exp2", "math.exp", "math.log", "math.log2", "math.tanh", "math.absf", "math.sqrt"}
DROPPABLE = {"cuir.mbarrier_wait", "cuir.mbarrier_arrive", "cuir.mbarrier_expect_tx", "cuir.named_barrier_sync",
             "cuir.named_barrier_arrive", "cuir.barrier", "cuir.fence_async_shared", "cuir.gemm_fence",
             "cuir.gemm_wait", "cuir.wait_group", "cuir.cluster_barrier"}
# predicate -> its neighbour one off and its negation
NEAR_PREDICATES = {"slt": ("sle", "sge"), "sle": ("slt", "sgt"), "sgt": ("sge", "sle"), "sge": ("sgt", "slt"),
                   "ult": ("ule", "uge"), "ule": ("ult", "ugt"), "ugt": ("uge", "ule"), "uge": ("ugt", "ult"),
                   "eq": ("ne",), "ne": ("eq",), "olt": ("ole", "oge"), "ole": ("olt", "ogt"),
                   "ogt": ("oge", "ole"), "oge": ("ogt", "olt"), "oeq": ("one",), "one": ("oeq",)}
OPERATORS = ("compare", "constant", "operand", "swap", "drop")


@dataclass(frozen=True)
class Mutant:
    index: int  # the op's position in the module's walk
    operator: str
    change: object
    description: str


@cache
def spec_at(path: str | None):
    """The spec at `path` (None: standard attention), loaded once per process."""
    return None if path is None else load_spec(path)


def load(program: str, spec_path: str | None) -> ModuleOp:
    """The reference program's IR, transferred to the spec if one is given."""
    if program == "sm90-pairs":
        module = lift_cuda_file(ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu",
                                "attention_sm90_bf16_d128_full_pairs").module
    else:
        path = ROOT / "examples" / "ir" / f"attention_{program}.mlir"
        module = parse_module(cuir_context(), path.read_text(), str(path))
    if spec_path is not None:
        transfer_kernel(find_kernel(module), spec_at(spec_path))
    return module


def mutants(module: ModuleOp) -> list[Mutant]:
    found = []
    for index, op in enumerate(module.walk()):
        where = f"{op.name} at line {op.location.line.data}" if hasattr(op.location, "line") else op.name
        for operator, change, what in _changes(op):
            found.append(Mutant(index, operator, change, f"{where}: {what}"))
    return found


def _changes(op: Operation):
    if isinstance(op, (arith.CmpiOp, arith.CmpfOp)):
        names = arith.CMPI_COMPARISON_OPERATIONS if isinstance(op, arith.CmpiOp) else arith.CMPF_COMPARISON_OPERATIONS
        current = names[op.predicate.value.data]
        yield from (("compare", near, f"{current} -> {near}") for near in NEAR_PREDICATES.get(current, ()))
    elif isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        value = op.value.value.data
        if isinstance(op.result.type, IntegerType) and op.result.type.width.data == 1:
            yield "constant", 1 - value, f"{value} -> {1 - value}"
        else:
            yield from (("constant", value + step, f"{value} -> {value + step}") for step in (1, -1))
    elif isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        value = op.value.value.data
        for new in ((0.0, 2 * value, -value) if value else (1.0,)):
            if abs(new) <= 3.4028234663852886e38:
                yield "constant", new, f"{value} -> {new}"
    elif op.name in BINARY:
        yield from (("operand", side, f"-> its operand {side}") for side in (0, 1))
        if op.name in NON_COMMUTATIVE:
            yield "swap", None, "operands swapped"
    elif op.name in UNARY:
        yield "operand", 0, "-> its operand"
    elif isinstance(op, arith.SelectOp):
        yield "swap", None, "arms swapped"
        yield from (("operand", side, f"-> its {arm} arm") for side, arm in ((1, "true"), (2, "false")))
    elif op.name in DROPPABLE and not any(result.uses for result in op.results):
        yield "drop", None, "dropped"


def apply(module: ModuleOp, mutant: Mutant) -> bool:
    """Plant `mutant`; False where it does not type-check (an operand of another type than the result)."""
    op = list(module.walk())[mutant.index]
    if mutant.operator == "compare":
        names = arith.CMPI_COMPARISON_OPERATIONS if isinstance(op, arith.CmpiOp) else arith.CMPF_COMPARISON_OPERATIONS
        op.properties["predicate"] = IntegerAttr(names.index(mutant.change), 64)
    elif mutant.operator == "constant":
        kind = FloatAttr if isinstance(op.value, FloatAttr) else IntegerAttr
        op.properties["value"] = kind(mutant.change, op.result.type)
    elif mutant.operator == "swap":
        first = 1 if isinstance(op, arith.SelectOp) else 0
        op.operands[first], op.operands[first + 1] = op.operands[first + 1], op.operands[first]
    elif mutant.operator == "operand":
        operand = op.operands[mutant.change]
        if operand.type != op.results[0].type:
            return False
        op.results[0].replace_all_uses_with(operand)
        op.detach()
        op.erase()
    elif mutant.operator == "drop":
        op.detach()
        op.erase()
    return True


class TimedOut(Exception):
    pass


def _time_out(signum, frame):
    raise TimedOut


def run(job: tuple[str, str | None, Mutant, int]) -> tuple[Mutant, str, float, str]:
    """(mutant, verdict, seconds, first line of the verifier's finding)."""
    program, spec_path, mutant, timeout = job
    started = time.monotonic()
    module = load(program, spec_path)
    if not apply(module, mutant):
        return mutant, "ill-typed", 0.0, ""
    signal.signal(signal.SIGALRM, _time_out)
    signal.alarm(timeout)
    try:
        result = verify(module, spec_at(spec_path))
        verdict, finding = ("SURVIVED", "") if result.ok else ("killed", result.summary().splitlines()[0])
    except TimedOut:
        verdict, finding = "timed out", f"no verdict in {timeout} s"
    except CuBridgeError as error:
        verdict, finding = "rejected", str(error).splitlines()[0]
    finally:
        signal.alarm(0)
    return mutant, verdict, time.monotonic() - started, finding


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("program", choices=("sm90", "sm80", "sm90-pairs"))
    parser.add_argument("--spec", help="verify the program transferred to this spec (default: the reference)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=240, help="seconds per mutant")
    parser.add_argument("--operator", action="append", choices=OPERATORS, help="only these operators")
    args = parser.parse_args(argv)
    try:
        module = load(args.program, args.spec)
    except CuBridgeError as error:
        print(error, file=sys.stderr)
        return 2
    unmutated = verify(module, spec_at(args.spec))
    if not unmutated.ok:
        print(f"the unmutated kernel does not verify: {unmutated.summary()}", file=sys.stderr)
        return 2
    planted = [m for m in mutants(module) if not args.operator or m.operator in args.operator]
    print(f"{len(planted)} mutants of {args.program}" + (f" transferred to {args.spec}" if args.spec else ""))
    verdicts: dict[str, int] = {}
    jobs = [(args.program, args.spec, mutant, args.timeout) for mutant in planted]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for mutant, verdict, seconds, finding in pool.imap_unordered(run, jobs):
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
            print(f"{verdict:10s} {seconds:6.1f} s  #{mutant.index} {mutant.description}  {finding}", flush=True)
    print("verdicts: " + ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
