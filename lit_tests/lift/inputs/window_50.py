"""Causal sliding window of 50 keys: query tile t (128 rows) starts at kv tile 2t - 1 (64 keys), an odd one, so
that the first visited tile of the lifted Ampere kernel's double buffer is not at an even index."""

WINDOW = 50


def mask_mod(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)
