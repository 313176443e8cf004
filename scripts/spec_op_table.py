"""Rewrite docs/specs.md's table of supported ATen operations from the lowering's registry.

    python3 scripts/spec_op_table.py   (tests/docs/test_specs.py checks the table is current)
"""

from pathlib import Path

from cubridge.frontends.hooks import op_table

BEGIN, END = "<!-- aten-ops:begin -->\n", "<!-- aten-ops:end -->\n"


def main() -> None:
    doc = Path(__file__).resolve().parents[1] / "docs" / "specs.md"
    text = doc.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    doc.write_text(head + BEGIN + op_table() + END + tail)


if __name__ == "__main__":
    main()
