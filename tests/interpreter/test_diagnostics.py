"""Each planted bug of lit_tests/cuir-run is found, as its diagnostic class."""

from pathlib import Path

import pytest
from example_programs import parse

from cubridge.interpreter import KernelPlan, ProblemShape, execute, verify
from cubridge.interpreter.executor import find_kernel
from cubridge.interpreter.verify import random_inputs

PLANTED = Path(__file__).resolve().parents[2] / "lit_tests" / "cuir-run"

ONE_TILE = ProblemShape(1, 1, 1, 128, 128, 128)
TWO_TILES = ProblemShape(1, 1, 1, 256, 128, 128)  # with one SM: two tiles in one program
CASES = [
    ("race_inflight_stage.mlir", {}, "race", {"race"}),
    ("race_unsynchronized_read.mlir", {"shapes": [ONE_TILE]}, "race", {"unsynchronized read"}),
    (
        "race_wrong_phase.mlir",
        {"shapes": [TWO_TILES], "num_sms": 1},
        "race",
        {"wrong phase", "unsynchronized read"},
    ),
    ("race_skipped_phase.mlir", {"shapes": [(1, 1, 1, 64, 64, 128)]}, "race", {"wrong phase"}),
    ("race_excess_arrival.mlir", {}, "race", {"mbarrier arrivals"}),
    ("race_tx_bytes.mlir", {}, "race", {"tx bytes"}),
    ("race_stage_overwrite.mlir", {}, "race", {"stage overwrite"}),
    ("race_missing_fence.mlir", {}, "race", {"missing fence"}),
    ("race_named_barrier_count.mlir", {}, "race", {"named barrier count", "deadlock"}),
    ("deadlock_tx_short.mlir", {}, "deadlock", {"deadlock"}),
    ("deadlock_arrival_count.mlir", {}, "deadlock", {"deadlock"}),
    ("coverage_unwritten.mlir", {}, "coverage", {"coverage"}),
    ("coverage_double_write.mlir", {}, "coverage", {"coverage"}),
]


@pytest.mark.parametrize("name, options, verdict, categories", CASES)
def test_planted_bug_is_found(name, options, verdict, categories):
    path = PLANTED / name
    result = verify(parse(path.read_text(), str(path)), **options)
    assert result.verdict == verdict
    assert {d.category for d in result.diagnostics} == categories
    assert all(d.location.startswith(f"{path}:") for d in result.diagnostics)


def test_short_tx_bytes_deadlock_says_the_phase_never_completes():
    path = PLANTED / "deadlock_tx_short.mlir"
    result = verify(parse(path.read_text(), str(path)))
    blocked = [d.message for d in result.diagnostics]
    assert any(m.startswith("@producer[0] of program 0 blocks on cuir.mbarrier_wait") for m in blocked)
    assert sum("32768/65536 tx bytes; fewer tx bytes than expected arrive" in m for m in blocked) == 2


@pytest.mark.parametrize("schedule_seed", [1, 2, 3])
def test_random_schedules_find_the_early_release(schedule_seed):
    path = PLANTED / "race_stage_overwrite.mlir"
    plan = KernelPlan(find_kernel(parse(path.read_text(), str(path))))
    shape = ProblemShape(1, 2, 2, 128, 300, 128)
    inputs = random_inputs(plan, shape, seed=0)
    run = execute(plan, shape, inputs, 0.1, schedule_seed=schedule_seed)
    categories = {d.category for d in run.log.diagnostics}
    assert categories and categories <= {"race", "stage overwrite"}
    assert all("%v_smem[" in d.message for d in run.log.diagnostics)
