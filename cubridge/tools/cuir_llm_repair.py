"""cuir-llm-repair: repair a CUDA source through an LLM's line-span edits, gated by nvcc.

Reads KERNEL.cu, takes nvcc's diagnostics (from --nvcc-log, or by compiling
it) and/or a requested change (--request), and writes the first edited
source that nvcc compiles to -o (stdout without it). Errors are one line on
stderr and exit status 1; the request ledger and the transcript's path
follow on stderr. See docs/llm.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cubridge.diagnostics import CuBridgeError
from cubridge.llm import session as llm_session
from cubridge.files import write_atomically
from cubridge.llm.loop import LoopPolicy
from cubridge.llm.repair import repair_cuda


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise CuBridgeError(message)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _ArgumentParser(prog="cuir-llm-repair", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="CUDA source (.cu)")
    parser.add_argument("-o", "--output", help="where the repaired source goes (default: stdout)")
    parser.add_argument("--request", help="the change to make, in words (for what the lowering cannot express)")
    parser.add_argument("--nvcc-log", metavar="FILE", help="nvcc's diagnostics for the input (default: compile it)")
    parser.add_argument("--capability", type=_capability, default=(9, 0), help="target compute capability (default 9.0: sm_90a)")
    parser.add_argument("-I", "--include", action="append", default=[], type=Path, metavar="DIR",
                        help="include directory for nvcc (the source's own and cubridge's are always there)")
    parser.add_argument("--max-attempts", type=int, default=LoopPolicy.max_attempts, help="rounds of feedback (default 4)")
    parser.add_argument("--samples", type=int, default=LoopPolicy.samples, help="replies per round (default 1)")
    parser.add_argument("--temperature", type=float, default=LoopPolicy.temperature, help="sampling temperature (default 0)")
    llm_session.add_llm_arguments(parser)
    return parser.parse_args(argv)


def _capability(text: str) -> tuple[int, int]:
    major, dot, minor = text.partition(".")
    if not (major.isdigit() and dot and minor.isdigit()):
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR such as 9.0, got '{text}'")
    return int(major), int(minor)


def _read_log(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise CuBridgeError(f"cannot read nvcc log: {error.strerror}", path) from None


def run(argv: Sequence[str] | None, session: llm_session.Session) -> int:
    args = _arguments(argv)
    session.configure(llm_session.flags_from(args), args.output)
    settings = session.settings("llm-repair")
    policy = LoopPolicy(args.max_attempts, args.samples, args.temperature)
    repaired = repair_cuda(args.input, args.request, _read_log(args.nvcc_log), args.capability,
                           tuple(args.include), policy, session, settings)
    if args.output is None:
        sys.stdout.write(repaired)
    else:
        write_atomically(Path(args.output), repaired, make_directories=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    session = llm_session.begin()
    try:
        return run(argv, session)
    except CuBridgeError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        for line in session.report():
            print(line, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
