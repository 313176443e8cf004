"""Times building a data-dependent mask's block lists for our kernels (cubridge.runtime.kernel_inputs, on the GPU)
beside FlexAttention's create_block_mask for the same mask and shape (median of 10 after a warm-up).

  python benchmarks/block_list_build.py examples/specs/document_mask.py --seqlen 8192 --batch 2 --heads 32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.tools.bench import grow_captures, hooks_on_gpu  # noqa: E402
from cubridge.frontends.spec import load_spec  # noqa: E402
from cubridge.runtime.kernel_inputs import build_block_lists  # noqa: E402


def median_ms(function, repeats: int = 10) -> float:
    function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - start))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("spec")
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    args = parser.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask

    spec = load_spec(args.spec)
    grow_captures(spec, args.seqlen)
    hooks_on_gpu(spec)
    shape = (args.batch, args.heads, args.seqlen, args.seqlen)
    ours = median_ms(lambda: build_block_lists(spec.mask_on("cuda"), shape, 128, 128, "cuda", keep_on_device=True))
    flex = median_ms(lambda: create_block_mask(spec.mask_mod, B=None, H=None, Q_LEN=args.seqlen, KV_LEN=args.seqlen,
                                               device="cuda"))
    print(f"{spec.name} S={args.seqlen} B={args.batch} H={args.heads}: cubridge block lists {ours:.2f} ms, "
          f"create_block_mask {flex:.2f} ms ({flex / ours:.2f}x)")


if __name__ == "__main__":
    main()
