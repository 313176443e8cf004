"""One launch of a spec's sm90 variant (bf16, D=128, B*S = 16k tokens) after a warm-up, for
ncu -k regex:<spec name> --launch-skip 1 --launch-count 1.

  python3 benchmarks/ncu_variant_once.py examples/specs/document_mask.py llama2-7b 4k
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cubridge.tools.bench import CONFIGS, TOKENS, grow_captures, hooks_on_gpu  # noqa: E402
from cubridge.runtime.variant import build_variant  # noqa: E402

spec_path, config, seqlen_text = sys.argv[1:4]
seqlen = int(seqlen_text.rstrip("k")) * (1024 if seqlen_text.endswith("k") else 1)
heads_q, heads_kv, head_dim = CONFIGS[config]
batch = max(1, TOKENS // seqlen)
kernel = build_variant(spec_path, "sm90")
grow_captures(kernel.spec, seqlen)
hooks_on_gpu(kernel.spec)
q = torch.randn(batch, heads_q, seqlen, head_dim, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(batch, heads_kv, seqlen, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
for _ in range(2):
    kernel(q, k, v)
torch.cuda.synchronize()
