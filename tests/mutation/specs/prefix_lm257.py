"""PrefixLM with a 257-token prefix: its kv bound (key 256) is the first key of a kv tile."""

PREFIX = 257


def mask_mod(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) | (kv_idx < PREFIX)
