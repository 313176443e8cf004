"""PrefixLM: the first PREFIX tokens are seen by every query; the rest is causal."""

PREFIX = 100


def mask_mod(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) | (kv_idx < PREFIX)
