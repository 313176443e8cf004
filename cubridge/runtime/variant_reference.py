"""Eager references of a spec's attention, for checking variant kernels on the GPU.

`spec_attention` computes the spec's attention from its traced hooks (so overridden captured tensors count)
in float64, or as eager PyTorch code does in 16 bits (16-bit matmuls with fp32 accumulation, hooks and
normalization in fp32, P rounded to the input dtype): FlashAttention's criterion compares a kernel's error
against the latter's. Fully masked rows give 0 output and -inf LSE, as FlexAttention does.
"""

from __future__ import annotations

import math

import torch

from cubridge.frontends.expr import evaluate
from cubridge.frontends.spec import AttentionSpec

ABS_SLACK = 1e-3


def _index_grid(batch: int, heads: int, seqlen_q: int, seqlen_kv: int, device, first_batch: int = 0,
                first_head: int = 0) -> dict[str, torch.Tensor]:
    return {
        "b": torch.arange(first_batch, first_batch + batch, device=device).view(-1, 1, 1, 1),
        "h": torch.arange(first_head, first_head + heads, device=device).view(1, -1, 1, 1),
        "q_idx": torch.arange(seqlen_q, device=device).view(1, 1, -1, 1),
        "kv_idx": torch.arange(seqlen_kv, device=device).view(1, 1, 1, -1),
    }


def spec_attention(spec: AttentionSpec, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                   captures: dict[str, torch.Tensor] | None = None, exact: bool = True, first_batch: int = 0,
                   first_head: int = 0):
    """(out, lse) of the spec's attention; float64 when `exact`, else in the eager 16-bit manner. lse is None
    unless the normalization is softmax. out is float64 or float32. q, k, v may be a slice of the problem that
    starts at batch entry `first_batch` and query head `first_head` (the hooks see the full problem's indices)."""
    captures = {name: t.to(q.device) for name, t in (captures or spec.captures).items()}
    batch, heads, seqlen_q, _ = q.shape
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    compute = torch.float64 if exact else torch.float32
    if exact:
        q, k, v = q.double(), k.double(), v.double()
    scores = (q @ k.transpose(-1, -2)).to(compute) * scale
    env = _index_grid(batch, heads, seqlen_q, k.shape[2], q.device, first_batch, first_head) | captures
    if spec.score_expr is not None:
        scores = evaluate(spec.score_expr, env | {"score": scores}).to(compute).expand_as(scores)
    keep = torch.ones_like(scores, dtype=torch.bool)
    if spec.mask_expr is not None:
        keep = evaluate(spec.mask_expr, env).expand_as(keep)
    scores = scores.masked_fill(~keep, -math.inf)
    lse = None
    if spec.normalization == "softmax":
        lse = torch.logsumexp(scores, dim=-1)
        probs = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    else:
        activation = torch.sigmoid if spec.normalization == "sigmoid" else torch.relu
        probs = torch.where(keep, activation(scores), 0.0)
    if not exact:
        probs = probs.to(v.dtype)
    return (probs @ v).to(compute), lse


def check_close(out: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> tuple[bool, float, float]:
    """FlashAttention's criterion: max |out - exact| <= 2 max |eager - exact| + ABS_SLACK. Returns (ok, the
    kernel's error, the bound); NaN never passes."""
    error = (out.double() - exact).abs().max().item()
    bound = 2 * (eager.double() - exact).abs().max().item() + ABS_SLACK
    return error <= bound, error, bound
