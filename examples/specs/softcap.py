"""Tanh soft-capping of the scores at +-CAP."""

import torch

CAP = 2.0


def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)
