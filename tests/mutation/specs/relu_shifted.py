"""ReLU attention with a threshold: P = relu(score - 1) on the causal mask."""

normalization = "relu"
THRESHOLD = 1.0


def score_mod(score, b, h, q_idx, kv_idx):
    return score - THRESHOLD


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
