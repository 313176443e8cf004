"""The CuIR reference a model reads: the dialect's own docstrings and the example programs.

Generated from `cubridge.dialect` each time, so it never drifts from the
dialect the gates verify against.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from cubridge.dialect import cuir, types

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "ir"
EXAMPLE_PROGRAMS = ("attention_sm90.mlir", "attention_sm80.mlir")


def cuir_reference() -> str:
    """Markdown: the dialect overview, every type and op with its docstring, the example programs."""
    sections = ["# CuIR reference", inspect.getdoc(cuir), "## Types", inspect.getdoc(types)]
    for type_class in cuir.CuIR.attributes:
        sections.append(f"### !{type_class.name}\n{inspect.getdoc(type_class)}")
    sections.append("## Operations")
    for op in cuir.CUIR_OPS:
        sections.append(f"### {op.name}\n{inspect.getdoc(op)}")
    sections.append(
        "## Example programs\nScalar and control-flow code uses the arith, math and scf dialects, "
        "as these programs do."
    )
    for name in EXAMPLE_PROGRAMS:
        text = (EXAMPLES_DIR / name).read_text()
        sections.append(f"### {name}\n```mlir\n{text.rstrip()}\n```")
    return "\n\n".join(sections) + "\n"
