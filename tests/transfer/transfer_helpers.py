"""Shared helpers of the transfer tests: load a reference program (checked in, or lifted from its CUDA) and
transfer it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from cubridge.dialect import cuir_context
from cubridge.diagnostics import parse_module
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.interpreter.verify import VerificationResult
from cubridge.passes.transfer import TransferPass

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "cubridge" / "runtime" / "kernels"
PROGRAMS = ("sm80", "sm90")
SPECS = sorted(p.stem for p in (ROOT / "examples" / "specs").glob("*.py"))


def spec_path(name: str) -> str:
    return str(ROOT / "examples" / "specs" / f"{name}.py")


def load_program(program: str, text: str | None = None) -> tuple[Context, ModuleOp]:
    path = ROOT / "examples" / "ir" / f"attention_{program}.mlir"
    ctx = cuir_context()
    return ctx, parse_module(ctx, text if text is not None else path.read_text(), str(path))


def transferred(program: str, spec: str) -> ModuleOp:
    ctx, module = load_program(program)
    TransferPass(spec).apply(ctx, module)
    return module


def lifted_transferred(kernel: Path, entry: str, spec: str) -> ModuleOp:
    """The lift of `entry` of the CUDA file `kernel`, with `spec` (a name in examples/specs) transferred onto it."""
    module = lift_cuda_file(kernel, entry).module
    TransferPass(spec_path(spec)).apply(cuir_context(), module)
    return module


def lifted_verification(kernel: Path, entry: str, spec: str, shapes: tuple[ProblemShape, ...]) -> VerificationResult:
    """`spec` transferred onto the lift of `entry` of `kernel`, verified on `shapes` at the entry's head dim."""
    return verify(lifted_transferred(kernel, entry, spec), load_spec(spec_path(spec)),
                  shapes=shapes_for_entry(shapes, entry), schedules=1)


def shapes_for_entry(shapes: tuple[ProblemShape, ...], entry: str) -> list[ProblemShape]:
    """`shapes` at the head dim of the entry point `entry` (named ..._d<D>_...)."""
    head_dim = int(entry.split("_d")[1].split("_")[0])
    return [dataclasses.replace(shape, head_dim=head_dim) for shape in shapes]
