"""ALiBi: causal, with a per-head linear penalty on the distance to each key.

The slopes are a captured tensor, so they become a kernel input.
"""

import torch

MAX_HEADS = 128
alibi_slopes = torch.exp2(-8.0 * torch.arange(1, MAX_HEADS + 1) / MAX_HEADS)


def score_mod(score, b, h, q_idx, kv_idx):
    return score + alibi_slopes[h] * (kv_idx - q_idx)


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
