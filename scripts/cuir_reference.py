"""Rewrite docs/cuir.md, the CuIR reference, from the dialect's definitions and docstrings.

    python3 scripts/cuir_reference.py   (tests/docs/test_cuir_reference.py checks the file is current)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cubridge.dialect.reference_doc import render  # noqa: E402
from cubridge.files import write_atomically  # noqa: E402


def main() -> None:
    write_atomically(Path(__file__).resolve().parents[1] / "docs" / "cuir.md", render())


if __name__ == "__main__":
    main()
