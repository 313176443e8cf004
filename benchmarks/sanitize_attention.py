"""Small attention_sm80 launches for compute-sanitizer (memcheck finds out-of-bounds accesses, racecheck
shared-memory races): odd SQ/SKV, GQA, both dtypes, both head dims, causal and full. GPU-only.

  compute-sanitizer --tool racecheck --error-exitcode 1 python3 benchmarks/sanitize_attention.py
"""

import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.runtime import attention_sm80  # noqa: E402

SHAPES = [(1, 2, 1, 1, 1), (1, 2, 2, 17, 200), (1, 4, 2, 200, 17), (1, 2, 2, 130, 130)]


def main() -> int:
    if not torch.cuda.is_available():
        print("sanitize_attention: needs a CUDA GPU", file=sys.stderr)
        return 2
    generator = torch.Generator(device="cuda").manual_seed(0)
    cases = itertools.product(SHAPES, (torch.bfloat16, torch.float16), (64, 128), (False, True))
    for (batch, heads_q, heads_kv, seqlen_q, seqlen_k), dtype, head_dim, causal in cases:
        def draw(heads, seqlen):
            return torch.randn(batch, heads, seqlen, head_dim, generator=generator, device="cuda").to(dtype)

        attention_sm80(draw(heads_q, seqlen_q), draw(heads_kv, seqlen_k), draw(heads_kv, seqlen_k), causal=causal,
                       return_lse=True)
    torch.cuda.synchronize()
    print("sanitize_attention: all launches done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
