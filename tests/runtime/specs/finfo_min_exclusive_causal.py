"""Each query sees only the keys strictly before it, written as eager code masks scores: the lowest float32 in
place of -inf (torch.finfo(...).min). Row 0 sees no key: FlexAttention's compiled kernels give it output 0 and LSE
-inf (its score times log2(e) is -inf in float32), where eager softmax would average every key."""

import torch


def score_mod(score, b, h, q_idx, kv_idx):
    return torch.where(kv_idx < q_idx, score, torch.finfo(score.dtype).min)
