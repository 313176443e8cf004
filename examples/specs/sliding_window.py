"""Causal sliding window: query i sees keys i - WINDOW + 1 .. i."""

WINDOW = 100


def mask_mod(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)
