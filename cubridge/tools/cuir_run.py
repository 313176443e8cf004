"""cuir-run: execute a CuIR kernel on the CPU and verify it against a specification.

Prints each diagnostic as a located line, then a one-line verdict; exits 0
only when the kernel is verified. Bad input (unreadable or invalid IR, a
shape the kernel cannot run, a spec that does not load) is one
`error: ...` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cubridge.diagnostics import CuBridgeError, parse_module
from cubridge.dialect import cuir_context
from cubridge.interpreter.executor import DEFAULT_NUM_SMS, ProblemShape
from cubridge.interpreter.verify import verify


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise CuBridgeError(message)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _ArgumentParser(prog="cuir-run", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="CuIR file, or - for stdin")
    parser.add_argument("--spec", help="attention specification (SPEC.py); default: standard attention")
    parser.add_argument(
        "--shape", type=ProblemShape.parse, help="B,HQ,HKV,SQ,SKV,D (default: a set of shapes)"
    )
    parser.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    parser.add_argument(
        "--schedules", type=_positive, default=1,
        help="schedules per run: round-robin, then seeded random ones (default 1)",
    )
    parser.add_argument(
        "--programs", type=_programs, default=None,
        help="'all' (default) or N: a seeded sample of N programs",
    )
    parser.add_argument(
        "--num-sms", type=_positive, default=DEFAULT_NUM_SMS,
        help=f"multiprocessors for persistent schedules (default {DEFAULT_NUM_SMS})",
    )
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def _programs(text: str) -> int | None:
    return None if text == "all" else _positive(text)


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
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
        shapes=None if args.shape is None else [args.shape],
        seeds=(args.seed,),
        schedules=args.schedules,
        programs=args.programs,
        num_sms=args.num_sms,
    )
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
