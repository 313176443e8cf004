"""Pointwise functions the activations do not cover, on the GPU: a T5-style bucket of the log10 distance rounded
half to even, an atan cap, fmod of the key index, a copysign, a cosh and an isnan guard."""

import torch


def score_mod(score, b, h, q_idx, kv_idx):
    distance = (q_idx - kv_idx).abs().float() + 1.0
    bucket = torch.round(torch.log10(distance) * 4.0)
    capped = 4.0 * torch.atan(score / 4.0)
    wobble = torch.copysign(torch.fmod(kv_idx.float(), 7.0) * 0.01, score)
    value = capped - 0.1 * bucket + wobble + 0.01 * torch.cosh(torch.fmod(q_idx.float(), 5.0) * 0.3)
    return torch.where(torch.isnan(value), 0.0, value)
