"""PrefixLM with a 400-token prefix: past the lengths of fixed default shapes."""

PREFIX = 400


def mask_mod(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) | (kv_idx < PREFIX)
