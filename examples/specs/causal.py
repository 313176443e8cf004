"""Causal attention: query i attends to keys 0..i (top-left aligned)."""


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
