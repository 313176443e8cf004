"""ReLU attention: P = relu(score) on the causal mask, without row normalization."""

normalization = "relu"


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
