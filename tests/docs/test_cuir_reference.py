"""docs/cuir.md is what scripts/cuir_reference.py generates from the dialect today."""

from pathlib import Path

from cubridge.dialect.cuir import CUIR_OPS
from cubridge.dialect.reference_doc import render

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_is_current():
    assert (ROOT / "docs" / "cuir.md").read_text() == render(), "regenerate it: python3 scripts/cuir_reference.py"


def test_every_op_has_a_documented_section():
    text = render()
    for op in CUIR_OPS:
        assert f"### `{op.name}`\n\n" in text
        assert f"### `{op.name}`\n\n(undocumented)" not in text
