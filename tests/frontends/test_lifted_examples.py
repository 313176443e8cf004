"""examples/ir/lifted/ holds the current lifts of the reference kernels (scripts/lift_examples.py)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lift_examples", ROOT / "scripts" / "lift_examples.py")
lift_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lift_examples)


@pytest.mark.parametrize("kernel, name", sorted(lift_examples.KERNELS.items()))
def test_checked_in_lift_is_current(kernel, name):
    checked_in = (lift_examples.LIFTED_DIR / name).read_text()
    assert checked_in == lift_examples.lifted_text(kernel), (
        f"examples/ir/lifted/{name} differs from a fresh lift of {kernel}: run python3 scripts/lift_examples.py"
    )
