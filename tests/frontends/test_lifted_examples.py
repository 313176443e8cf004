"""The generated example programs (scripts/lift_examples.py) are current: examples/ir/attention_sm90.mlir and
examples/ir/attention_sm80.mlir are the lifts of the reference kernels, and
examples/ir/attention_sm90_race.mlir is the Hopper lift with its one documented mutation."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lift_examples", ROOT / "scripts" / "lift_examples.py")
lift_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lift_examples)
GENERATED = lift_examples.generated_files()


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_checked_in_example_is_current(name):
    checked_in = (ROOT / name).read_text()
    assert checked_in == GENERATED[name], (
        f"{name} differs from a fresh generation: run python3 scripts/lift_examples.py"
    )


def test_the_race_example_differs_from_the_lift_by_one_moved_wait():
    lift = GENERATED["examples/ir/attention_sm90.mlir"].splitlines()[2:]
    race = GENERATED[lift_examples.RACE_EXAMPLE].splitlines()
    race = race[race.index(lift[0]):]
    assert sorted(lift) == sorted(race)
    moved = [line for line in race if line.strip().startswith("cuir.gemm_wait") and race.index(line) != lift.index(line)]
    assert len(moved) == 1
