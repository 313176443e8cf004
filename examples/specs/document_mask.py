"""Document masking: packed sequences attend only within their own document.

`document_id` (captured, so a kernel input) gives each position's document.
"""

import torch

MAX_SEQLEN = 512
DOCUMENT_LENGTHS = (37, 120, 5, 64, 200, 86)
document_id = torch.repeat_interleave(
    torch.arange(len(DOCUMENT_LENGTHS)), torch.tensor(DOCUMENT_LENGTHS)
)


def mask_mod(b, h, q_idx, kv_idx):
    return document_id[q_idx] == document_id[kv_idx]
