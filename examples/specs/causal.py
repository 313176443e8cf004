"""Causal attention: query i attends to keys 0..i (top-left aligned).

`reference` gives the ground truth eagerly, with PyTorch's own causal attention.
"""

import torch


def mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def reference(q, k, v, scale):
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=scale, enable_gqa=True
    )
