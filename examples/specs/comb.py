"""PrefixLM mask, tanh soft-capped scores and sigmoid normalization together."""

import torch

normalization = "sigmoid"
PREFIX = 64
CAP = 4.0


def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def mask_mod(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) | (kv_idx < PREFIX)
