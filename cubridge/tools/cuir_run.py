"""cuir-run: execute a CuIR kernel on the CPU and verify it against a specification.

Prints each diagnostic as a located line, then a one-line verdict naming the
shapes it ran (or the failing run).

Default shapes are derived from the kernel and the spec: sequence lengths
at c-1, c and c+1 of every integer constant below 1024 of the kernel (tile
sizes, kv bounds, mask code) and of the spec's hooks, and of every tile
edge, within the lengths of the spec's captured tensors (a warning on
stderr says how far they reach and why, and a square shape at that length
runs too); each length is SQ
of one shape and SKV of another; batch 2, grouped-query and one-to-one
heads; two multiprocessors, so each persistent program runs several work
tiles. A kernel over block lists also gets, where those shapes lack one, a
shape with a kv tile listed full (from longer square shapes, up to 1024),
one listed partial, a work tile that starts on a full kv tile and, if it
skips them, an empty work tile. Every shape runs with seeds 0 (q, k, v from N(0, 1)) and 1 (query
rows scaled so that scores reach well past every constant of score_mod),
each under the round-robin and a random schedule. Last, one query row over
keys past (largest kernel constant + 1) tiles runs once (seed 0,
round-robin), so that a constant taken for a count of kv tiles is seen, as
do (once each) shapes whose lengths differ by a constant c at a tile edge e,
(e + 1, e - c +- 1) and back; and
a kernel over block lists runs once more on captured values of the
verifier's (each captured tensor constant over tile-aligned blocks), where a
work tile starts on a full kv tile past the first. Column 0 of v is ones:
column 0 of o, the row sums of P, is checked as `rowsum`.

Tolerances (FlashAttention's criterion), per output (o, rowsum, lse):
max_abs and relative Frobenius error at most twice those of the same
computation in the kernel's precision against the float64 reference, plus
a floor of 2^-10 (bf16), 2^-13 (f16) or 2^-20 (f32), times max|ref| for
max_abs.

Exit status: 0 verified; 1 mismatch, race, deadlock, fault or coverage
error, or a shape the kernel refuses (its cuir.trap); 2 bad input (unreadable or invalid IR, a shape the kernel cannot
run, a spec that does not load), reported as one `error: ...` line on
stderr.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # small GEMMs: thread pools only contend

import argparse  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from cubridge.diagnostics import CuBridgeError, parse_module, refuse_cuda_input  # noqa: E402
from cubridge.dialect import cuir_context  # noqa: E402
from cubridge.interpreter.executor import ProblemShape  # noqa: E402
from cubridge.interpreter.shapes import VERIFY_NUM_SMS  # noqa: E402
from cubridge.interpreter.verify import verify  # noqa: E402


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise CuBridgeError(message)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    description, epilog = __doc__.split("\n\n", 1)
    parser = _ArgumentParser(
        prog="cuir-run",
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", help="CuIR file, or - for stdin")
    parser.add_argument("--spec", help="attention specification (SPEC.py); default: standard attention")
    parser.add_argument(
        "--shape", type=ProblemShape.parse, action="append",
        help="B,HQ,HKV,SQ,SKV,D; repeatable (default: shapes derived from the kernel and spec)",
    )
    parser.add_argument(
        "--seed", type=_seed, action="append",
        help="input seed; repeatable (default 0 and 1): 0 is N(0, 1), others widen the scores",
    )
    parser.add_argument(
        "--schedules", type=_positive, default=2,
        help="schedules per run: round-robin, then seeded random ones (default 2)",
    )
    parser.add_argument(
        "--programs", type=_programs, default=None,
        help="'all' (default) or N: a seeded sample of N programs",
    )
    parser.add_argument(
        "--num-sms", type=_positive, default=VERIFY_NUM_SMS,
        help=f"multiprocessors for persistent schedules (default {VERIFY_NUM_SMS})",
    )
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return int(text)


def _programs(text: str) -> int | None:
    return None if text == "all" else _positive(text)


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    refuse_cuda_input(path, f"lift it first (cuir-opt --lift {path} | cuir-run -)")
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read(), path
    except OSError as error:
        raise CuBridgeError(f"cannot read input: {error.strerror}", path) from None


def _load_spec(path: str | None):
    if path is None:
        return None
    try:
        from cubridge.frontends.spec import load_spec

        return load_spec(path)
    except CuBridgeError:
        raise
    except Exception as error:  # a spec is user code: any failure is a bad input
        raise CuBridgeError(f"cannot load spec: {error}", path) from None


def run(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    text, filename = _read(args.input)
    module = parse_module(cuir_context(), text, filename)
    spec = _load_spec(args.spec)
    result = verify(
        module,
        spec=spec,
        shapes=args.shape,
        seeds=args.seed or (0, 1),
        schedules=args.schedules,
        programs=args.programs,
        num_sms=args.num_sms,
    )
    for note in result.notes:
        print(f"warning: {note}", file=sys.stderr)
    for diagnostic in result.diagnostics:
        print(diagnostic)
    print(f"cuir-run: {result.summary()}")
    return 0 if result.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except CuBridgeError as error:
        print(error, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
