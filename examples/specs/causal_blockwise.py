"""Block-causal: a query sees every key of its own block of BLOCK tokens and of earlier blocks."""

BLOCK = 50


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx // BLOCK >= kv_idx // BLOCK
