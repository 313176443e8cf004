"""Small attention_sm80 / attention_sm90 launches for compute-sanitizer (memcheck finds out-of-bounds accesses,
racecheck shared-memory races): odd SQ/SKV, GQA, both dtypes, every head dim the kernel takes, causal and full.
GPU-only.

  compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
      python3 benchmarks/sanitize_attention.py [sm80|sm90]

(without --report-api-errors no, memcheck also counts the CUDA API errors that libraries provoke while they
probe the driver, none of them in a kernel)

Every Hopper mbarrier wait is bounded: $CUBRIDGE_WAIT_TIMEOUT, 60 seconds unless set. A deadlocked launch then
prints the barrier it waited on and fails instead of hanging the sanitizer; and under racecheck the unbounded
wait loop (a bare try_wait spin) hangs about one whole run in ten although no wait deadlocks: the bounded loop,
the same barrier protocol, did not hang in 33 runs (docs/performance.md, runs 200-203).
"""

import itertools
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.runtime import attention_sm80, attention_sm90  # noqa: E402
from cubridge.runtime.compiler import WAIT_TIMEOUT_VARIABLE  # noqa: E402

KERNELS = {"sm80": (attention_sm80, (64, 128)), "sm90": (attention_sm90, (64, 128, 256))}

WAIT_TIMEOUT_SECONDS = "60"


def bound_mbarrier_waits() -> None:
    """Builds every kernel from here on with each mbarrier wait bounded ($CUBRIDGE_WAIT_TIMEOUT, unless set)."""
    os.environ.setdefault(WAIT_TIMEOUT_VARIABLE, WAIT_TIMEOUT_SECONDS)


SHAPES = [(1, 2, 1, 1, 1), (1, 2, 2, 17, 200), (1, 4, 2, 200, 17), (1, 2, 2, 130, 130)]
# Keys enough for attention_sm90's 160-key kv tiles (full masks at D = 128 from S_K = 8192 on), with a tail: one of
# 109 keys, and one of 64, whose softmax and P V run narrow (kNarrowsLastKvTile).
WIDE_SHAPES = [(1, 2, 1, 130, 8192 + 77), (1, 2, 1, 130, 8192 + 32)]


def main() -> int:
    if not torch.cuda.is_available():
        print("sanitize_attention: needs a CUDA GPU", file=sys.stderr)
        return 2
    name = sys.argv[1] if len(sys.argv) > 1 else "sm80"
    if name not in KERNELS:
        print(f"sanitize_attention: unknown kernel {name!r}; choose from {sorted(KERNELS)}", file=sys.stderr)
        return 2
    attention, head_dims = KERNELS[name]
    bound_mbarrier_waits()
    generator = torch.Generator(device="cuda").manual_seed(0)
    dtypes = (torch.bfloat16, torch.float16)
    cases = list(itertools.product(SHAPES, dtypes, head_dims, (False, True)))
    if name == "sm90":
        cases += itertools.product(WIDE_SHAPES, dtypes, (128,), (False,))
    for (batch, heads_q, heads_kv, seqlen_q, seqlen_k), dtype, head_dim, causal in cases:
        def draw(heads, seqlen):
            return torch.randn(batch, heads, seqlen, head_dim, generator=generator, device="cuda").to(dtype)

        attention(draw(heads_q, seqlen_q), draw(heads_kv, seqlen_k), draw(heads_kv, seqlen_k), causal=causal,
                  return_lse=True)
    torch.cuda.synchronize()
    print(f"sanitize_attention: all {name} launches done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
