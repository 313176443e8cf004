"""Causal attention with tanh soft-capped scores (Gemma-2 style): CAP * tanh(score / CAP)."""

import torch

CAP = 30.0


def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
