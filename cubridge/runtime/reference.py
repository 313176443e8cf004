"""The plain and causal attention of the hand-written kernels, as tests and benchmarks check them."""

from __future__ import annotations

import torch

from cubridge.reference import attention_reference


def causal_mask_mod(b, h, q_idx, kv_idx):
    """Top-left aligned causal mask_mod: query i attends to keys j <= i, as torch SDPA's is_causal."""
    return kv_idx <= q_idx


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        scale: float | None = None, compute_dtype: torch.dtype = torch.float64,
                        return_lse: bool = True):
    """(out, lse) of softmax(scale q k^T [+ causal mask]) v by `cubridge.reference.attention_reference`: in
    float64 (out float64), or in q's 16-bit dtype as eager PyTorch code computes (out in that dtype, lse
    float32). lse is the natural-log LSE, None unless return_lse."""
    if compute_dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    result = attention_reference(q, k, v, mask_mod=causal_mask_mod if causal else None, scale=scale,
                                 compute_dtype=compute_dtype, return_lse=return_lse, broadcast_hooks=True)
    return result if return_lse else (result, None)


def causal_density(seqlen_q: int, seqlen_k: int) -> float:
    """Exact fraction of (query, key) pairs a top-left causal mask keeps: sum_i min(i + 1, SKV) / (SQ SKV)."""
    full_rows = max(0, seqlen_q - seqlen_k)  # rows i >= SKV - 1 see every key
    partial = min(seqlen_q, seqlen_k)
    kept = partial * (partial + 1) // 2 + full_rows * seqlen_k
    return kept / (seqlen_q * seqlen_k)
