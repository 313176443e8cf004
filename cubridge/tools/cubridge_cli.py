"""cubridge: build a spec's variant kernel into a directory, or benchmark variants on the GPU.

  cubridge build SPEC.py [--reference sm90|sm80] [--arch sm_90a] -o DIR
  cubridge bench SPEC.py... [--configs llama2-7b,...] [--seqlens 1k,2k,...] [-o DIR]

`build` transfers the spec onto each of the reference's programs (one per kv tile size: sm90's D = 128, 64
and 256 entry points' lifts; sm80's D = 128 lift, which serves D 64 and 128), verifies each in the CPU
executor with the full default verification of `cuir-run` (shapes derived from the kernel and the spec, two
seeds, two schedules, async races and deadlocks checked), lowers it to CUDA and, where nvcc is found, compiles
it for --arch. DIR then holds, for the program that serves D = 128, SPEC.cu (the patched reference kernel,
bf16 and fp16 entry points), SPEC.mlir (the transferred CuIR) and SPEC.patch (the patch against the
reference source); the same three as SPEC.d64.* and SPEC.d256.* for sm90's other programs; and
verification.md (per program: the runs' shapes, errors against the float64 reference, races checked, the
nvcc check). DIR is written whole or not at all: a failed build leaves it as it was.

`bench` is documented by `cubridge bench --help` (cubridge/tools/bench.py).

Exit status: 0 success; 1 verification failed or nvcc rejected the kernel; 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import NamedTuple

from cubridge.diagnostics import CuBridgeError
from cubridge.files import plain_mode

REFERENCES = ("sm90", "sm80")
DEFAULT_ARCH = {"sm90": "sm_90a", "sm80": "sm_80"}
BUILD_FILES = ("{name}.cu", "{name}.mlir", "{name}.patch", "verification.md")
_ARCH = re.compile(r"^sm_(\d)(\d)(a?)$")


class _BuiltProgram(NamedTuple):
    """One verified program of a build: its files' stem, the head dims it serves, the transferred CuIR, its
    lowering, its verification and, where it has K/V pair entry points, the verification of its pair form."""

    stem: str
    head_dims: tuple[int, ...]
    transferred: object
    lowered: object
    result: object
    pairs: object


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise CuBridgeError(f"{self.prog}: {message}")


class BuildFailed(Exception):
    """The build ran but its result is not usable (verification or nvcc failed); exit status 1."""


def _parser() -> argparse.ArgumentParser:
    description, epilog = __doc__.split("\n\n", 1)
    parser = _ArgumentParser(prog="cubridge", description=description, epilog=epilog,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)
    build = commands.add_parser("build", help="transfer, verify, lower and compile a spec's variant into DIR")
    build.add_argument("spec", help="the variant spec (SPEC.py)")
    build.add_argument("--reference", default="sm90",
                       help="reference program: sm90 (Hopper, default) or sm80 (Ampere); for another "
                            "reference kernel use `cuir-opt --lift --transfer=SPEC --lower FILE.cu`")
    build.add_argument("--arch", help="nvcc target: sm_90a for sm90 (default), sm_80 or newer for sm80")
    build.add_argument("-o", "--output", required=True, help="output directory")
    from cubridge.tools import bench

    bench.add_arguments(commands.add_parser("bench", help=bench.SUMMARY, description=bench.__doc__,
                                            formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def _step(message: str) -> None:
    print(f"cubridge build: {message}", file=sys.stderr, flush=True)


def _capability(arch: str, reference: str) -> tuple[int, int]:
    """The compute capability of an `sm_XY[a]` target that the reference's kernels can run on."""
    match = _ARCH.match(arch)
    if not match:
        raise CuBridgeError(f"--arch: expected sm_XY (as in sm_90a or sm_80), got '{arch}'")
    capability = (int(match[1]), int(match[2]))
    if reference == "sm90" and arch != "sm_90a":
        raise CuBridgeError(f"--arch: the sm90 reference needs sm_90a (wgmma, setmaxnreg), got {arch}")
    if capability < (8, 0):
        raise CuBridgeError(f"--arch: CuBridge kernels need sm_80 or newer, got {arch}")
    return capability


def build(spec_path: str, reference: str, arch: str | None, output: str) -> None:
    """Write the variant's files into `output` (see the module docstring); CuBridgeError on bad input,
    BuildFailed when verification or nvcc fails. Nothing is written unless everything succeeded."""
    if reference.endswith(".cu"):
        raise CuBridgeError(f"--reference: expected {' or '.join(REFERENCES)} (a CUDA file goes through "
                            "`cuir-opt --lift --transfer=SPEC --lower FILE.cu -o OUT.cu`)", reference)
    if reference not in REFERENCES:
        raise CuBridgeError(f"--reference: expected {' or '.join(REFERENCES)}, got '{reference}'")
    arch = arch or DEFAULT_ARCH[reference]
    capability = _capability(arch, reference)
    target = Path(output)
    _check_output(target)

    from cubridge.frontends.spec import load_spec
    from cubridge.runtime.variant import build_variant

    start = time.perf_counter()
    spec = load_spec(spec_path)
    _step(f"loaded {spec_path} ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    kernel = build_variant(spec, reference)
    _step(f"transferred onto the {reference} reference ({time.perf_counter() - start:.1f} s)")
    built: list[_BuiltProgram] = []
    for stem, head_dims in _programs(kernel, spec.name):
        dims = "/".join(map(str, head_dims))
        start = time.perf_counter()
        program = kernel.program(head_dims[0])
        if 128 not in head_dims:  # the D = 128 program was transferred above
            _step(f"transferred onto the lift of the D = {dims} entry point ({time.perf_counter() - start:.1f} s)")
        start = time.perf_counter()
        _step(f"verifying the D = {dims} program in the executor (shapes derived from the kernel and the spec, "
              "2 seeds, 2 schedules) ...")
        result = _verified(program.transferred, spec, dims, start)
        pair_program, pairs = kernel.pair_program(head_dims[0]), None
        if pair_program is not None:
            start = time.perf_counter()
            _step(f"verifying the D = {dims} program in K/V pairs (two-CTA clusters) in the executor ...")
            pairs = _verified(pair_program.transferred, spec, f"{dims}, K/V pairs", start)
        built.append(_BuiltProgram(stem, head_dims, program.transferred, program.lowered(spec.name), result, pairs))
    files = {}
    for done in built:
        files |= {f"{done.stem}.cu": done.lowered.source, f"{done.stem}.mlir": _program_text(done.transferred),
                  f"{done.stem}.patch": done.lowered.diff()}
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    staging.chmod(plain_mode(directory=True))  # mkdtemp's directory is private; the build's is an ordinary one
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        nvcc_lines = [_nvcc_check(staging / f"{done.stem}.cu", capability, arch) for done in built]
        report = _report(spec, spec_path, reference, built, nvcc_lines)
        (staging / "verification.md").write_text(report, encoding="utf-8")
        _replace_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _step(f"wrote {', '.join([*files, 'verification.md'])} to {target}")


def _programs(kernel, name: str) -> list[tuple[str, tuple[int, ...]]]:
    """(file stem, head dims) of each of the reference's programs, the one serving D = 128 first and named after
    the spec alone, the others after their head dims (`softcap.d64`)."""
    from cubridge.runtime.variant import reference_source

    by_tile: dict[int, list[int]] = {}
    for head_dim, kv_tile in reference_source(kernel.reference).kv_tiles.items():
        if head_dim in kernel.head_dims:
            by_tile.setdefault(kv_tile, []).append(head_dim)
    groups = sorted(by_tile.values(), key=lambda dims: 128 not in dims)
    return [(name if 128 in dims else f"{name}.d{'-'.join(map(str, dims))}", tuple(dims)) for dims in groups]


def _check_output(target: Path) -> None:
    """DIR may be absent, empty, or an earlier build's (only files a build writes)."""
    if not target.exists():
        return
    if not target.is_dir():
        raise CuBridgeError("-o: exists and is not a directory", str(target))
    patterns = [re.escape(name).replace(r"\{name\}", r"[\w.-]+") for name in BUILD_FILES]
    foreign = [p.name for p in target.iterdir() if not any(re.fullmatch(pattern, p.name) for pattern in patterns)]
    if foreign:
        raise CuBridgeError(f"-o: the directory holds files a build did not write ({', '.join(sorted(foreign)[:3])}); "
                            "choose an empty or new directory", str(target))


def _replace_directory(staging: Path, target: Path) -> None:
    """Move the finished staging directory to `target`, replacing an earlier build there."""
    if not target.exists():
        os.replace(staging, target)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
    os.replace(target, retired / "build")
    os.replace(staging, target)
    shutil.rmtree(retired, ignore_errors=True)


def _program_text(module) -> str:
    from xdsl.printer import Printer

    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


def _nvcc_check(source: Path, capability: tuple[int, int], arch: str) -> str:
    """Compile the lowered source for `arch` when nvcc is found; the report's line about it. BuildFailed
    when nvcc rejects it."""
    from cubridge.runtime.compiler import compile_cubin
    from cubridge.runtime.errors import CompileError, InvalidSettingError, NvccNotFoundError

    start = time.perf_counter()
    _step(f"compiling with nvcc for {arch} ...")
    try:
        compiled = compile_cubin(source, capability)
    except NvccNotFoundError:
        _step("nvcc not found: the source was not compiled")
        return "nvcc: not found on this machine; the source was not compiled"
    except CompileError as error:
        raise BuildFailed(str(error).splitlines()[0]) from None
    except InvalidSettingError as error:
        raise BuildFailed(str(error)) from None
    seconds = time.perf_counter() - start
    cached = " (from the cubin cache)" if compiled.cache_hit else ""
    _step(f"nvcc: compiled for {arch} in {seconds:.1f} s{cached}")
    line = f"nvcc: compiled for {arch}{cached}, cubin {len(compiled.cubin)} bytes"
    if not compiled.serialized_gemms:
        return line
    serialized = "; ".join(compiled.serialized_gemms)
    _step(f"warning: ptxas serialized the GEMMs of {serialized}: they run far below the reference's speed")
    return f"{line}; **ptxas serialized the GEMMs** (each waits for the one before: far below the reference's speed) " \
           f"of {serialized}"


def _verified(program, spec, what: str, start: float):
    """The default verification of `program`, its notes and verdict printed; a failure ends the build."""
    from cubridge.interpreter.verify import verify

    result = verify(program, spec=spec)
    for note in result.notes:
        _step(f"warning: {note}")
    _step(f"{result.summary()} ({time.perf_counter() - start:.1f} s)")
    if not result.ok:
        for diagnostic in result.diagnostics:
            print(diagnostic, file=sys.stderr)
        raise BuildFailed(f"verification failed (D = {what}): {result.summary()}")
    return result


def _report(spec, spec_path: str, reference: str, built: list[_BuiltProgram], nvcc_lines: list[str]) -> str:
    """verification.md: per program, its files, entry points, verdict, every run with its errors and bounds, and
    what was checked."""
    lines = [
        f"# {spec.name} on the {reference} reference",
        "",
        f"- spec: `{spec_path}` (normalization {spec.normalization}; captured tensors: "
        f"{', '.join(f'{n} {list(t.shape)}' for n, t in spec.captures.items()) or 'none'})",
        "- checked on every run: async races (reads of in-flight results, stage overwrites), mbarrier phase, "
        "arrival and transaction counts, named-barrier mismatches, deadlocks and coverage of every output row; "
        "none found",
        "- tolerance: FlashAttention's criterion (twice the error of the same computation in the kernel's "
        "precision against the float64 reference, plus a floor; `cuir-run --help`)",
    ]
    for (stem, head_dims, _, lowered, result, pairs), nvcc_line in zip(built, nvcc_lines):
        entries = [name for instance in lowered.instances for name in (instance.name, instance.pair_name) if name]
        lines += [
            "",
            f"## D = {'/'.join(map(str, head_dims))}: `{stem}.cu`, `{stem}.mlir`, `{stem}.patch`",
            "",
            f"- entry points: {', '.join(entries) or 'none (the reference kernel unchanged)'}",
            f"- verdict: {result.summary()}",
            *(f"- warning: {note}" for note in result.notes),
            *([f"- in K/V pairs (two-CTA clusters, the pair entry points' program): {pairs.summary()}"]
              if pairs is not None else []),
            f"- {nvcc_line}",
            "",
            "| B | HQ | HKV | SQ | SKV | D | seed | schedule | captured values | output | max_abs (tol) | "
            "relative (tol) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in result.runs:
            shape = run.shape
            for error in run.errors:
                lines.append(
                    f"| {shape.batch} | {shape.heads_q} | {shape.heads_kv} | {shape.seqlen_q} | {shape.seqlen_kv} | "
                    f"{shape.head_dim} | {run.seed} | {run.schedule} | {run.captures} | {error.name} | "
                    f"{error.max_abs:.2e} ({error.max_abs_bound:.2e}) | {error.relative:.2e} ({error.relative_bound:.2e}) |"
                )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "build":
            build(args.spec, args.reference, args.arch, args.output)
            return 0
        from cubridge.tools import bench

        return bench.run(args)
    except BuildFailed as failure:
        print(f"cubridge build: {failure}", file=sys.stderr)
        return 1
    except CuBridgeError as error:
        print(error, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
