"""Causal sliding window plus GLOBAL leading tokens that every query sees."""

WINDOW = 64
GLOBAL = 16


def mask_mod(b, h, q_idx, kv_idx):
    in_window = q_idx - kv_idx < WINDOW
    return (q_idx >= kv_idx) & (in_window | (kv_idx < GLOBAL))
