"""An eager attention function, as a user would write it: causal, tanh soft-capped.

No hooks: the frontend traces `attention` with torch.fx and recovers score_mod
(the soft cap), mask_mod (the causal masked_fill) and the softmax; `attention`
itself is the ground truth.
"""

import torch

CAP = 2.5


def attention(q, k, v):
    scale = q.shape[-1] ** -0.5
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scores = q @ k.transpose(-2, -1) * scale
    q_idx = torch.arange(scores.shape[-2], device=q.device)[:, None]
    kv_idx = torch.arange(scores.shape[-1], device=q.device)[None, :]
    scores = CAP * torch.tanh(scores / CAP)
    scores = scores.masked_fill(kv_idx > q_idx, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
