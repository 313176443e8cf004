"""Eager references of a spec's attention, for checking variant kernels on the GPU.

`spec_attention` computes the spec's attention from its traced hooks (so overridden captured tensors count)
with `cubridge.reference.attention_reference`, in float64 or as eager PyTorch code does in 16 bits:
FlashAttention's criterion (`check_close`) compares a kernel's error against the latter's.
"""

from __future__ import annotations

import torch

from cubridge.frontends.spec import AttentionSpec
from cubridge.reference import attention_reference

ABS_SLACK = 1e-3


def spec_attention(spec: AttentionSpec, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                   captures: dict[str, torch.Tensor] | None = None, exact: bool = True, first_batch: int = 0,
                   first_head: int = 0):
    """(out, lse) of the spec's attention by `cubridge.reference.attention_reference`: float64 when `exact`,
    else in q's 16-bit dtype as eager PyTorch code computes (out float32, lse float32). lse is None unless
    the normalization is softmax. q, k, v may be a slice of the problem that starts at batch entry
    `first_batch` and query head `first_head` (the hooks see the full problem's indices)."""
    score_mod, mask_mod = spec.broadcast_hooks(q.device, captures)
    if exact:
        q, k, v = q.double(), k.double(), v.double()
    softmax = spec.normalization == "softmax"
    result = attention_reference(q, k, v, score_mod, mask_mod, scale=scale, normalization=spec.normalization,
                                 compute_dtype=torch.float64 if exact else q.dtype, return_lse=softmax,
                                 broadcast_hooks=True, first_batch=first_batch, first_head=first_head)
    out, lse = result if softmax else (result, None)
    return (out if exact else out.float()), lse


def check_close(out: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> tuple[bool, float, float]:
    """FlashAttention's criterion: max |out - exact| <= 2 max |eager - exact| + ABS_SLACK. Returns (ok, the
    kernel's error, the bound); NaN never passes."""
    error = (out.double() - exact).abs().max().item()
    bound = 2 * (eager.double() - exact).abs().max().item() + ABS_SLACK
    return error <= bound, error, bound
