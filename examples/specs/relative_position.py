"""Relative position bias: the score grows linearly with the distance to earlier keys."""

SLOPE = 0.02


def score_mod(score, b, h, q_idx, kv_idx):
    return score + SLOPE * (q_idx - kv_idx)
