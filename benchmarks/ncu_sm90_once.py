"""One attention_sm90 launch (bf16, B1 H32 S8192 D128, non-causal) after a warm-up, for ncu --launch-skip 1."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cubridge.runtime import attention_sm90  # noqa: E402

q, k, v = (torch.randn(1, 32, 8192, 128, device="cuda").bfloat16() for _ in range(3))
for _ in range(2):
    attention_sm90(q, k, v)
torch.cuda.synchronize()
