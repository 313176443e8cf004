"""Parsing helpers shared by the executor tests."""

from pathlib import Path

from cubridge.diagnostics import parse_module
from cubridge.dialect import cuir_context

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ir"


def parse(text: str, filename: str = "test.mlir"):
    return parse_module(cuir_context(), text, filename)


def load_example(name: str):
    """Parse examples/ir/NAME (a fresh module each call)."""
    path = EXAMPLES / name
    return parse(path.read_text(), str(path))
