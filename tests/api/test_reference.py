"""cubridge.reference.attention_reference against FlexAttention's own eager implementation on the CPU."""

import math
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from cubridge.reference import attention_reference

DOCUMENT = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4])


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def documents(b, h, q_idx, kv_idx):
    return DOCUMENT[q_idx] == DOCUMENT[kv_idx]


def late_rows_only(b, h, q_idx, kv_idx):
    return (q_idx >= 3) & (kv_idx <= q_idx)  # rows 0..2 fully masked


def softcap(score, b, h, q_idx, kv_idx):
    return 3.0 * torch.tanh(score / 3.0)


def alibi(score, b, h, q_idx, kv_idx):
    return score - (h + 1) * 0.25 * (q_idx - kv_idx).abs()


def flex(q, k, v, score_mod, mask_mod, gqa):
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2], device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa, return_lse=True)


@pytest.mark.parametrize("score_mod", [None, softcap, alibi])
@pytest.mark.parametrize("mask_mod", [None, causal, documents, late_rows_only])
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)])
def test_matches_flex_attention(score_mod, mask_mod, heads):
    torch.manual_seed(0)
    q = torch.randn(2, heads[0], 17, 16)
    k, v = (torch.randn(2, heads[1], 17, 16) for _ in range(2))
    expected_out, expected_lse = flex(q, k, v, score_mod, mask_mod, heads[0] != heads[1])
    out, lse = attention_reference(q, k, v, score_mod, mask_mod, return_lse=True, max_chunk_scores=2 * 4 * 17 * 5)
    torch.testing.assert_close(out, expected_out, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(lse, expected_lse, atol=2e-5, rtol=2e-5)


def test_fully_masked_rows_are_zero_with_minus_infinite_lse():
    q, k, v = (torch.randn(1, 1, 8, 16) for _ in range(3))
    out, lse = attention_reference(q, k, v, mask_mod=late_rows_only, return_lse=True)
    assert out[0, 0, :3].abs().max() == 0 and torch.isneginf(lse[0, 0, :3]).all()
    assert torch.isfinite(lse[0, 0, 3:]).all()


def test_rows_a_score_mod_sets_to_minus_infinity_are_zero():
    def drop_row_two(score, b, h, q_idx, kv_idx):
        return torch.where(q_idx == 2, -math.inf, score)

    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    out, lse = attention_reference(q, k, v, drop_row_two, return_lse=True)
    expected_out, expected_lse = flex(q, k, v, drop_row_two, None, False)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(lse, expected_lse)


def test_rows_a_score_mod_sets_to_the_lowest_float_are_zero_as_flex_attentions_kernels_give():
    """FlexAttention's compiled kernels take scores to base 2 in float32, where finfo.min * log2(e) is -inf: such
    a row is masked (its eager path averages it uniformly instead); elsewhere the lowest float is an ordinary
    masked score."""
    def lowest_before_row_two(score, b, h, q_idx, kv_idx):
        return torch.where((q_idx >= 2) & (kv_idx <= q_idx), score, torch.finfo(torch.float32).min)

    def minus_infinity_before_row_two(score, b, h, q_idx, kv_idx):
        return torch.where((q_idx >= 2) & (kv_idx <= q_idx), score, -math.inf)

    q, k, v = (torch.randn(1, 2, 6, 8, dtype=torch.float64) for _ in range(3))
    out, lse = attention_reference(q, k, v, lowest_before_row_two, return_lse=True, compute_dtype=torch.float64)
    expected_out, expected_lse = flex(q, k, v, minus_infinity_before_row_two, None, False)
    assert out[0, :, :2].abs().max() == 0 and torch.isneginf(lse[0, :, :2]).all()
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(lse, expected_lse)


@pytest.mark.parametrize("normalization,activation", [("sigmoid", torch.sigmoid), ("relu", torch.relu)])
def test_pointwise_normalizations_apply_the_activation_to_kept_scores(normalization, activation):
    q, k, v = (torch.randn(1, 2, 9, 8, dtype=torch.float64) for _ in range(3))
    out = attention_reference(q, k, v, mask_mod=causal, normalization=normalization, compute_dtype=torch.float64)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    probs = torch.where(torch.ones(9, 9, dtype=torch.bool).tril(), activation(scores), 0.0)
    torch.testing.assert_close(out, probs @ v)


def test_float64_compute_gives_a_float64_lse_and_chunking_changes_nothing():
    q, k, v = (torch.randn(2, 2, 33, 8) for _ in range(3))
    whole = attention_reference(q, k, v, softcap, None, compute_dtype=torch.float64,
                                return_lse=True)
    chunked = attention_reference(q, k, v, softcap, None, compute_dtype=torch.float64,
                                  return_lse=True, max_chunk_scores=1)
    assert whole[1].dtype == torch.float64
    torch.testing.assert_close(whole, chunked, atol=0, rtol=0)


def test_bad_arguments_are_rejected():
    q = torch.randn(1, 3, 4, 8)
    k = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        attention_reference(q, k, k)
    with pytest.raises(ValueError, match="no log-sum-exp"):
        attention_reference(q, q, q, normalization="relu", return_lse=True)
    with pytest.raises(ValueError, match="normalization must be one of"):
        attention_reference(q, q, q, normalization="tanh")
