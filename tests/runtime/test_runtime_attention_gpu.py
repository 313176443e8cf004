"""GPU correctness of attention_sm80 against a float64 reference (FlashAttention's criterion)."""

import pytest
import torch

from cubridge.runtime import attention_sm80
from attention_checks import assert_close_to_reference, random_qkv

pytestmark = pytest.mark.gpu

# (batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim)
SHAPES = [
    (1, 2, 2, 1, 1, 64),
    (2, 4, 2, 17, 17, 128),
    (1, 2, 1, 200, 1000, 128),
    (1, 3, 3, 1000, 200, 64),
    (2, 8, 2, 333, 517, 64),
    (1, 4, 4, 1024, 1024, 128),
    (1, 2, 2, 128, 64, 128),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_hq{}_hkv{}_sq{}_sk{}_d{}".format(*s))
def test_matches_float64_reference(shape, dtype, causal):
    generator = torch.Generator(device="cuda").manual_seed(hash((shape, causal)) % 2**31)
    q, k, v = random_qkv(shape, dtype, generator)
    out, lse = attention_sm80(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == dtype
    assert_close_to_reference(q, k, v, causal, out, lse)


def test_strided_inputs_and_custom_scale():
    generator = torch.Generator(device="cuda").manual_seed(7)
    # [B, S, H, D] storage viewed as [B, H, S, D]: non-contiguous heads and sequence.
    q = torch.randn(2, 300, 8, 128, generator=generator, device="cuda").bfloat16().transpose(1, 2)
    kv = torch.randn(2, 250, 2, 2, 128, generator=generator, device="cuda").bfloat16()
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    out = attention_sm80(q, k, v, causal=True, scale=0.05)
    assert_close_to_reference(q, k, v, True, out, None, scale=0.05)


def test_results_do_not_move_between_runs():
    generator = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = random_qkv((2, 8, 8, 1000, 1000, 128), torch.bfloat16, generator)
    first = attention_sm80(q, k, v, causal=True)
    for _ in range(3):
        assert torch.equal(attention_sm80(q, k, v, causal=True), first)
