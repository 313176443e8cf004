"""Plain PyTorch attention used as the correctness reference by tests and benchmarks."""

from __future__ import annotations

import math

import torch


def causal_mask(seqlen_q: int, seqlen_k: int, device: torch.device) -> torch.Tensor:
    """Top-left aligned causal mask, True where query i may attend to key j (j <= i), as torch SDPA is_causal."""
    rows = torch.arange(seqlen_q, device=device)[:, None]
    cols = torch.arange(seqlen_k, device=device)[None, :]
    return cols <= rows


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        scale: float | None = None, compute_dtype: torch.dtype = torch.float64,
                        return_lse: bool = True):
    """(out, lse) of softmax(scale q k^T) v computed eagerly in `compute_dtype` ([B, H, S, D], GQA by
    repeating key/value heads). out is in `compute_dtype`; lse (natural log) in float64, None unless
    return_lse. Softmax runs in float32 for 16-bit compute dtypes, as eager PyTorch code usually does."""
    group = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    q_c = q.to(compute_dtype)
    k_c = k.to(compute_dtype).repeat_interleave(group, dim=1)
    v_c = v.to(compute_dtype).repeat_interleave(group, dim=1)
    scores = (q_c @ k_c.transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    lse = torch.logsumexp(scores.double(), dim=-1) if return_lse else None
    probs = torch.softmax(scores.float() if compute_dtype != torch.float64 else scores, dim=-1).to(compute_dtype)
    return probs @ v_c, lse


def causal_density(seqlen_q: int, seqlen_k: int) -> float:
    """Exact fraction of (query, key) pairs a top-left causal mask keeps: sum_i min(i + 1, SKV) / (SQ SKV)."""
    full_rows = max(0, seqlen_q - seqlen_k)  # rows i >= SKV - 1 see every key
    partial = min(seqlen_q, seqlen_k)
    kept = partial * (partial + 1) // 2 + full_rows * seqlen_k
    return kept / (seqlen_q * seqlen_k)
