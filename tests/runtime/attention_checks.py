"""Shared checks of the attention kernels' GPU tests: random inputs and FlashAttention's criterion
(max error vs float64 at most twice that of eager PyTorch in the same dtype, plus 1e-3)."""

import torch

from cubridge.runtime.reference import reference_attention


def random_qkv(shape, dtype, generator):
    batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim = shape

    def draw(heads, seqlen):
        return torch.randn(batch, heads, seqlen, head_dim, generator=generator, device="cuda").to(dtype)

    return draw(heads_q, seqlen_q), draw(heads_kv, seqlen_k), draw(heads_kv, seqlen_k)


def assert_close_to_reference(q, k, v, causal, out, lse, scale=None):
    exact_out, exact_lse = reference_attention(q, k, v, causal, scale)
    eager_out, _ = reference_attention(q, k, v, causal, scale, compute_dtype=q.dtype)
    assert torch.isfinite(out).all(), "non-finite output (unwritten rows or NaN)"
    ours = (out.double() - exact_out).abs().max().item()
    eager = (eager_out.double() - exact_out).abs().max().item()
    assert ours <= 2 * eager + 1e-3, f"max abs error {ours:.2e} vs eager {q.dtype} {eager:.2e}"
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == exact_lse.shape
        lse_error = (lse.double() - exact_lse).abs().max().item()
        assert lse_error <= 1e-3, f"LSE max abs error {lse_error:.2e}"
