"""Special functions of the positions, in no example: a query attends only where the sine of its index is
positive (whole rows masked, decided by values as small as sin(355) = -3.0e-5), and the cosine of the distance
biases its scores (arguments up to the sequence length)."""

import torch


def score_mod(score, b, h, q_idx, kv_idx):
    return score + 0.5 * torch.cos((q_idx - kv_idx).float())


def mask_mod(b, h, q_idx, kv_idx):
    return torch.sin(q_idx.float()) > 0
