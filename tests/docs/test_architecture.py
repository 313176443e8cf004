"""docs/architecture.md states the op-to-primitive table that cubridge.runtime.primitives holds."""

from pathlib import Path

from cubridge.runtime.primitives import markdown_table

ROOT = Path(__file__).resolve().parents[2]


def test_primitive_table_is_current():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert markdown_table().rstrip() in doc


def test_every_cuir_op_has_a_lowering():
    from cubridge.dialect.cuir import CUIR_OPS
    from cubridge.runtime.primitives import PLAIN_CPP_OPS, PRIMITIVES

    lowered = {p.op for p in PRIMITIVES} | set(PLAIN_CPP_OPS)
    missing = sorted(op.name for op in CUIR_OPS if op.name not in lowered)
    assert missing == []
