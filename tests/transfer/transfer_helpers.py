"""Shared helpers of the transfer tests: load a reference program and transfer it."""

from __future__ import annotations

from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from cubridge.dialect import cuir_context
from cubridge.diagnostics import parse_module
from cubridge.passes.transfer import TransferPass

ROOT = Path(__file__).resolve().parents[2]
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
