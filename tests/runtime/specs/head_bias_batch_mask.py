"""A variant written for the GPU tests, in no example: a captured per-head bias on the scores, and a mask that
reads the batch index (batch 0 attends causally, later batch entries everywhere) - block lists."""

import torch

head_bias = torch.linspace(-1.0, 1.0, 8)


def score_mod(score, b, h, q_idx, kv_idx):
    return score + head_bias[h]


def mask_mod(b, h, q_idx, kv_idx):
    return (b > 0) | (kv_idx <= q_idx)
