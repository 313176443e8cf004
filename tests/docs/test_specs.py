"""docs/specs.md states the ATen operations the hook lowering supports, from its registry."""

from pathlib import Path

from cubridge.frontends.hooks import op_table

ROOT = Path(__file__).resolve().parents[2]


def test_aten_op_table_is_current():
    doc = (ROOT / "docs" / "specs.md").read_text()
    assert op_table() in doc, "regenerate it: python3 scripts/spec_op_table.py"
