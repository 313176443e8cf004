"""torch's mask combinators, in no example: a causal window of 128 keys or one of the first 4 (and_masks starts
from a constant True, which the hooks then evaluate beside tensors on the GPU)."""

from torch.nn.attention.flex_attention import and_masks, or_masks


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx <= 128


def sink(b, h, q_idx, kv_idx):
    return kv_idx < 4


mask_mod = or_masks(and_masks(causal, window), sink)
