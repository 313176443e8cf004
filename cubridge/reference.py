"""The eager PyTorch reference of attention with FlexAttention-style hooks.

`attention_reference` computes what `cubridge.attention` (and a kernel built from a spec) computes, with
plain torch operations, as FlexAttention defines it:

- scores = scale * q k^T (scale defaults to 1/sqrt(D)), then `score_mod(score, b, h, q_idx, kv_idx)` and
  `mask_mod(b, h, q_idx, kv_idx)` applied to every element, vmapped over b, h, q_idx and kv_idx as
  FlexAttention applies them (tensor indexing inside a hook reads the captured tensor, as in FlexAttention);
- normalization `softmax` (the output is softmax(scores) v), `sigmoid` or `relu` (the activation of each
  kept score, without row normalization);
- grouped-query attention: HQ = g * HKV, query head h reads kv head h // g (FlexAttention's `enable_gqa`);
- a fully masked row (every entry masked by mask_mod, or set by score_mod to -inf or to a score whose float32
  value times log2(e) overflows, such as torch.finfo(torch.float32).min) has output 0 and LSE -inf, as
  FlexAttention's compiled kernels give (its unfused eager path averages such a row uniformly instead);
- the LSE (softmax only) is the natural-log log-sum-exp of the modified, masked scores, float32 (float64
  when computing in float64).

Memory is bounded: the query rows run in chunks of at most `max_chunk_scores` scores (B * HQ * rows * SKV).
Computation is in float32 (`compute_dtype=torch.float64` for a ground truth), or, with a 16-bit
`compute_dtype`, as eager PyTorch code in that dtype computes: 16-bit matmuls (float32 accumulation), hooks
and normalization in float32, probabilities rounded to 16 bits before P V (FlashAttention's accuracy
criterion measures a kernel against this one's error). The output has q's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from cubridge.frontends.hooks import IndexWithTensors

NORMALIZATIONS = ("softmax", "sigmoid", "relu")
DEFAULT_CHUNK_SCORES = 2**24  # a hook's every intermediate is a chunk-sized tensor until the hook returns
LOG2_E = math.log2(math.e)
SIXTEEN_BIT = (torch.float16, torch.bfloat16)


def attention_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        score_mod: Callable | None = None, mask_mod: Callable | None = None, *,
                        scale: float | None = None, normalization: str = "softmax",
                        compute_dtype: torch.dtype = torch.float32, return_lse: bool = False,
                        max_chunk_scores: int = DEFAULT_CHUNK_SCORES, broadcast_hooks: bool = False,
                        first_batch: int = 0, first_head: int = 0):
    """Attention of [B, HQ, SQ, D] `query` over [B, HKV, SKV, D] `key` / `value` with the hooks; returns out
    [B, HQ, SQ, D] in query's dtype and, with `return_lse`, the LSE [B, HQ, SQ] in `compute_dtype` (float32
    for a 16-bit one). See the module docstring for the semantics. With `broadcast_hooks` the hooks are called
    once per chunk on broadcastable index grids (b [B,1,1,1], h [1,H,1,1], q_idx [1,1,Q,1], kv_idx
    [1,1,1,KV]), as traced hooks evaluate, instead of vmapped. When the tensors are a slice of a larger problem
    that starts at batch entry `first_batch` and query head `first_head`, the hooks see the larger problem's
    b and h."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}; got {normalization!r}")
    if return_lse and normalization != "softmax":
        raise ValueError(f"return_lse: the {normalization} normalization has no log-sum-exp")
    batch, heads_q, seqlen_q, head_dim = query.shape
    heads_kv, seqlen_kv = key.shape[1], key.shape[2]
    if heads_q % heads_kv:
        raise ValueError(f"query heads ({heads_q}) must be a multiple of key/value heads ({heads_kv})")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    group = heads_q // heads_kv
    score_dtype = torch.float32 if compute_dtype in SIXTEEN_BIT else compute_dtype
    keys = key.to(compute_dtype).repeat_interleave(group, dim=1)
    values = value.to(compute_dtype).repeat_interleave(group, dim=1)
    device = query.device
    indices = {
        "b": torch.arange(first_batch, first_batch + batch, device=device),
        "h": torch.arange(first_head, first_head + heads_q, device=device),
        "kv_idx": torch.arange(seqlen_kv, device=device),
    }
    if broadcast_hooks:
        score_hook, mask_hook = score_mod, mask_mod
        indices = {"b": indices["b"].view(-1, 1, 1, 1), "h": indices["h"].view(1, -1, 1, 1),
                   "kv_idx": indices["kv_idx"].view(1, 1, 1, -1)}
    else:
        score_hook = per_element(score_mod, score_first=True) if score_mod is not None else None
        mask_hook = per_element(mask_mod, score_first=False) if mask_mod is not None else None
    rows = max(1, max_chunk_scores // max(1, batch * heads_q * seqlen_kv))
    out = torch.empty(query.shape, dtype=query.dtype, device=device)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=score_dtype, device=device) if return_lse else None
    for start in range(0, seqlen_q, rows):
        stop = min(seqlen_q, start + rows)
        q_idx = torch.arange(start, stop, device=device)
        q_idx = q_idx.view(1, 1, -1, 1) if broadcast_hooks else q_idx
        scores = (query[:, :, start:stop].to(compute_dtype) @ keys.transpose(-1, -2)).to(score_dtype) * scale
        if score_hook is not None:
            scores = score_hook(scores, indices["b"], indices["h"], q_idx, indices["kv_idx"])
            scores = torch.as_tensor(scores).to(score_dtype).expand(batch, heads_q, stop - start, seqlen_kv)
            scores = scores.masked_fill(vanishes_in_base_2(scores), -math.inf)
        keep = torch.ones((), dtype=torch.bool, device=device)
        if mask_hook is not None:
            keep = torch.as_tensor(mask_hook(indices["b"], indices["h"], q_idx, indices["kv_idx"])).to(device)
        scores = scores.masked_fill(~keep, -math.inf)
        if normalization == "softmax":
            row_lse = torch.logsumexp(scores, dim=-1)
            probs = torch.exp(scores - row_lse[..., None]).nan_to_num(0.0)  # -inf rows: exp(nan) -> 0
            if lse is not None:
                lse[:, :, start:stop] = row_lse
        else:
            activation = torch.sigmoid if normalization == "sigmoid" else torch.relu
            probs = torch.where(keep & (scores > -math.inf), activation(scores), 0.0)
        out[:, :, start:stop] = (probs.to(compute_dtype) @ values).to(query.dtype)
    return (out, lse) if return_lse else out


def vanishes_in_base_2(scores: torch.Tensor) -> torch.Tensor:
    """Where a score is -inf once FlexAttention's kernels take it to base 2 (float32 score * log2(e) overflows,
    e.g. torch.finfo(torch.float32).min): such a score is masked, so a row of them has output 0, not uniform."""
    return scores.to(torch.float32) * LOG2_E == -math.inf


def per_element(hook: Callable, score_first: bool) -> Callable:
    """`hook` on 1-D b, h, q_idx, kv_idx vectors (and a [B, H, SQ, SKV] score), giving
    [B, H, SQ, SKV]: vmapped over each, as FlexAttention applies hooks."""
    score_dims = (0,) if score_first else ()

    def vectorized(*args):  # a hook may return a Python bool or number (`return True`): vmap takes only tensors
        return torch.as_tensor(hook(*args))

    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)):
        vectorized = torch.vmap(vectorized, in_dims=score_dims + dims)

    def apply(*args):
        with IndexWithTensors():
            return torch.as_tensor(vectorized(*args))

    return apply
