"""Composition: a causal sliding window with tanh soft-capped scores (Gemma-2 style)."""

import torch

WINDOW = 96
CAP = 3.0


def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def mask_mod(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)
