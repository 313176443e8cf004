"""The example programs verify against standard attention; the racy one does not."""

import numpy as np
import pytest

from cubridge.interpreter import ProblemShape, StandardAttention, verify
from cubridge.interpreter.verify import DEFAULT_SIZES

EXAMPLES = ("attention_sm80.mlir", "attention_sm90.mlir")


def test_default_shapes_cover_the_hard_cases():
    assert len(DEFAULT_SIZES) >= 3
    assert any(b > 1 for b, *_ in DEFAULT_SIZES)
    assert any(hq != hkv for _, hq, hkv, _, _ in DEFAULT_SIZES)
    assert any(sq != skv for *_, sq, skv in DEFAULT_SIZES)
    for *_, sq, skv in DEFAULT_SIZES:
        assert sq % 64 and skv % 64


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_verifies_on_default_shapes(example, name):
    result = verify(example(name))
    assert result.verdict == "verified", result.summary()
    assert len(result.runs) == len(DEFAULT_SIZES)
    worst = result.worst()
    assert set(worst) == {"o", "lse"}
    assert worst["o"].relative_frobenius < 5e-3
    assert worst["lse"].relative_frobenius < 1e-6


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
    result = verify(example(name), shapes=[shape], schedules=4, programs=3, num_sms=4)
    assert result.ok, result.summary()
    assert [run.schedule for run in result.runs] == ["round-robin", "random#1", "random#2", "random#3"]


def test_persistent_schedule_with_several_tiles_per_program(example):
    result = verify(example("attention_sm90.mlir"), shapes=[ProblemShape(2, 3, 1, 300, 150, 128)], num_sms=5)
    assert result.ok, result.summary()


@pytest.mark.parametrize("name", EXAMPLES)
def test_wrong_spec_is_a_mismatch(example, name):
    shape = ProblemShape(1, 2, 2, 100, 100, 128)
    result = verify(example(name), spec=StandardAttention(causal=True), shapes=[shape])
    assert result.verdict == "mismatch"
    assert result.failing_run is not None
    assert result.worst()["o"].relative_frobenius > 1e-1
    assert result.summary().startswith("mismatch: o rel_frob=")


def test_race_example_names_the_map_and_the_gemm_async(example):
    result = verify(example("attention_sm90_race.mlir"))
    assert result.verdict == "race"
    (diagnostic,) = result.diagnostics
    text = str(diagnostic)
    assert "race: cuir.map at " in text and "attention_sm90_race.mlir:139:11" in text
    assert "the result of cuir.gemm_async at " in text and "attention_sm90_race.mlir:136:11" in text
    assert text.endswith("before its cuir.gemm_wait")


def test_tolerance_override_turns_a_pass_into_a_mismatch(example):
    shape = ProblemShape(1, 1, 1, 64, 64, 128)
    assert verify(example("attention_sm80.mlir"), shapes=[shape], tolerance=1e-9).verdict == "mismatch"


def test_standard_attention_is_top_left_causal():
    spec = StandardAttention(causal=True)
    q = np.ones((1, 1, 2, 4))
    k = np.ones((1, 1, 3, 4))
    v = np.arange(12, dtype=np.float64).reshape(1, 1, 3, 4)
    np.testing.assert_allclose(spec.reference(q, k, v, 1.0)[0, 0, 0], v[0, 0, 0])
    np.testing.assert_allclose(spec.reference(q, k, v, 1.0)[0, 0, 1], v[0, 0, :2].mean(axis=0))
    np.testing.assert_allclose(spec.reference_lse(q, k, v, 1.0)[0, 0], [4.0, 4.0 + np.log(2.0)])
