"""Host time of one attention_sm90 call: mean wall time of back-to-back calls on a 1-row problem (GPU-only)."""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cubridge.runtime import attention_sm90  # noqa: E402

q, k, v = (torch.randn(1, 1, 1, 128, device="cuda").bfloat16() for _ in range(3))
for _ in range(20):
    attention_sm90(q, k, v)
torch.cuda.synchronize()
calls = 200
start = time.perf_counter()
for _ in range(calls):
    attention_sm90(q, k, v)
torch.cuda.synchronize()
print(f"attention_sm90 host overhead: {(time.perf_counter() - start) / calls * 1e6:.1f} us per call (1-row problem)")
