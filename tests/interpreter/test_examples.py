"""The example programs verify against standard attention; the racy one does not."""

import numpy as np
import pytest

from cubridge.dialect.attributes import Schedule, ScheduleAttr, TileOrder, TileOrderAttr
from cubridge.interpreter import KernelPlan, ProblemShape, StandardAttention, execute, verify
from cubridge.interpreter.executor import find_kernel
from cubridge.interpreter.shapes import default_shapes, long_shapes, offset_shapes
from cubridge.interpreter.verify import random_inputs
from example_programs import EXAMPLES as EXAMPLES_DIR

EXAMPLES = ("attention_sm80.mlir", "attention_sm90.mlir")


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_verifies_on_default_shapes(example, name):
    module = example(name)
    shapes = default_shapes(find_kernel(module), StandardAttention(), 128)
    offsets = offset_shapes(find_kernel(module), StandardAttention(), 128, shapes)
    long_kv, long_q = long_shapes(find_kernel(module), StandardAttention(), 128)
    result = verify(module)
    assert result.verdict == "verified", result.summary()
    # two seeds, two schedules; the offset shapes and the long shapes once
    assert len(result.runs) == len(shapes) * 2 * 2 + len(offsets) + 2
    assert result.shapes() == [*shapes, *offsets, long_kv, long_q]
    assert long_kv.seqlen_q == 1 and long_kv.seqlen_kv == 129 * 128 + 1  # past 129 tiles of 128
    assert long_q.seqlen_q == 129 * 128 + 1 and long_q.seqlen_kv == 1
    worst = result.worst()
    assert set(worst) == {"o", "rowsum", "lse"}
    assert worst["o"].relative < 5e-3
    assert worst["lse"].relative < 1e-6
    assert all(error.severity < 0.7 for error in worst.values())


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize(
    "sizes", [(1, 1, 1, 1, 1), (2, 2, 1, 129, 64), (1, 4, 4, 64, 257), (1, 6, 2, 250, 31)]
)
def test_example_verifies_on_more_shapes(example, name, sizes):
    result = verify(example(name), shapes=[ProblemShape(*sizes, 128)], seeds=(0, 1))
    assert result.ok, result.summary()


@pytest.mark.parametrize("name", EXAMPLES)
def test_random_schedules_and_sampled_programs_verify(example, name):
    shape = ProblemShape(1, 2, 1, 300, 200, 128)
    result = verify(example(name), shapes=[shape], seeds=(0,), schedules=4, programs=3, num_sms=4)
    assert result.ok, result.summary()
    assert [run.schedule for run in result.runs] == ["round-robin", "random#1", "random#2", "random#3"]


def test_persistent_schedule_with_several_tiles_per_program(example):
    result = verify(example("attention_sm90.mlir"), shapes=[ProblemShape(2, 3, 1, 300, 150, 128)], num_sms=5)
    assert result.ok, result.summary()


def test_dynamic_schedule_gives_the_persistent_results(example):
    """Which program runs which tile must not matter: the Hopper example claiming tiles
    dynamically (longest first) writes exactly what the persistent stride writes."""
    shape = ProblemShape(2, 3, 1, 700, 500, 128)
    persistent = example("attention_sm90.mlir")
    dynamic = example("attention_sm90.mlir")
    kernel = find_kernel(dynamic)
    kernel.schedule = ScheduleAttr(Schedule.DYNAMIC)
    kernel.order = TileOrderAttr(TileOrder.LONGEST_FIRST)
    plans = [KernelPlan(find_kernel(m)) for m in (persistent, dynamic)]
    assert plans[0].program_tiles(shape, 5) != plans[1].program_tiles(shape, 5)
    inputs = random_inputs(plans[0], shape, seed=3)
    runs = [execute(plan, shape, inputs, 0.1, num_sms=5) for plan in plans]
    assert not runs[0].log and not runs[1].log
    for name in ("o", "lse"):
        np.testing.assert_array_equal(runs[0].outputs[name], runs[1].outputs[name])
    assert verify(dynamic, shapes=[shape], schedules=2, num_sms=5).ok


@pytest.mark.parametrize("name", EXAMPLES)
def test_wrong_spec_is_a_mismatch(example, name):
    shape = ProblemShape(1, 2, 2, 100, 100, 128)
    result = verify(example(name), spec=StandardAttention(causal=True), shapes=[shape])
    assert result.verdict == "mismatch"
    assert result.failing_run is not None
    assert result.failing_run.errors[0].relative > 1e-1
    assert result.summary().startswith("mismatch: o max_abs=")


def test_race_example_names_the_map_and_the_gemm_async(example):
    result = verify(example("attention_sm90_race.mlir"))
    assert result.verdict == "race"
    (diagnostic,) = result.diagnostics
    text = str(diagnostic)
    lines = (EXAMPLES_DIR / "attention_sm90_race.mlir").read_text().splitlines()
    map_line = next(i for i, line in enumerate(lines, 1) if "cuir.map %s_5 at" in line)
    gemm_line = next(i for i, line in enumerate(lines, 1) if "%s_5, %s_done_1 = cuir.gemm_async" in line)
    assert "race: cuir.map at " in text and f"attention_sm90_race.mlir:{map_line}:13" in text
    assert "the result of cuir.gemm_async at " in text and f"attention_sm90_race.mlir:{gemm_line}:11" in text
    assert text.endswith("before its cuir.gemm_wait")


def test_standard_attention_is_top_left_causal():
    spec = StandardAttention(causal=True)
    q = np.ones((1, 1, 2, 4))
    k = np.ones((1, 1, 3, 4))
    v = np.arange(12, dtype=np.float64).reshape(1, 1, 3, 4)
    np.testing.assert_allclose(spec.reference(q, k, v, 1.0)[0, 0, 0], v[0, 0, 0])
    np.testing.assert_allclose(spec.reference(q, k, v, 1.0)[0, 0, 1], v[0, 0, :2].mean(axis=0))
    np.testing.assert_allclose(spec.reference_lse(q, k, v, 1.0)[0, 0], [4.0, 4.0 + np.log(2.0)])
