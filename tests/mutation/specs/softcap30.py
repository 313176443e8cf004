"""Tanh soft-capping at +-30 (Gemma-2's logit cap): N(0, 1) scores never reach it."""

import torch

CAP = 30.0


def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)
