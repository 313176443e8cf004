"""Rounding to the GPU's narrow float formats."""

import numpy as np
import pytest
import torch

from cubridge.interpreter.numerics import round_to_bf16, round_to_f16


def _bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def test_bf16_rounds_ties_to_even():
    one = np.float32(1.0)
    half_ulp = np.float32(2.0**-8)  # bf16 has 7 fraction bits: ulp(1) = 2^-7
    values = np.array([one + half_ulp, one + 3 * half_ulp, one + half_ulp * 1.5], dtype=np.float32)
    expected = np.array([1.0, 1.0 + 2 * 2.0**-7, 1.0 + 2.0**-7], dtype=np.float32)
    np.testing.assert_array_equal(round_to_bf16(values), expected)


def test_bf16_matches_torch_on_random_values():
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000)).astype(np.float32)
    expected = torch.from_numpy(values).to(torch.bfloat16).to(torch.float32).numpy()
    np.testing.assert_array_equal(_bits(round_to_bf16(values)), _bits(expected))


def test_bf16_results_have_no_low_bits():
    rng = np.random.default_rng(1)
    rounded = round_to_bf16(rng.standard_normal(1000).astype(np.float32))
    assert not (_bits(rounded) & 0xFFFF).any()


@pytest.mark.parametrize(
    "value, expected",
    [(np.inf, np.inf), (-np.inf, -np.inf), (3.4e38, np.inf), (0.0, 0.0), (-0.0, -0.0)],
)
def test_bf16_special_values(value, expected):
    result = round_to_bf16(np.array([value], dtype=np.float32))[0]
    assert result == expected and np.signbit(result) == np.signbit(expected)


def test_bf16_keeps_nan():
    assert np.isnan(round_to_bf16(np.array([np.nan], dtype=np.float32))[0])


def test_f16_rounds_like_numpy_half():
    values = np.array([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 70000.0], dtype=np.float32)
    np.testing.assert_array_equal(round_to_f16(values), [1.0, 1.0 + 2.0**-9, np.inf])
