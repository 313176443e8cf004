"""The worked example in docs/writing-passes.md is the file the lit test runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_listing_is_the_example_pass():
    doc = (ROOT / "docs" / "writing-passes.md").read_text()
    listings = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    example = (ROOT / "examples" / "passes" / "exp_to_exp2.py").read_text()
    assert listings[0] == example
