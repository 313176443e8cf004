"""Rows a score_mod masks entirely: every third query sees no key (-inf scores)."""

import torch


def score_mod(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx % 3 == 1, -float("inf"), score)
