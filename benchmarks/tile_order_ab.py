"""Paired timing of a block-list variant under tile orders that differ only in the schedule's tail (GPU-only):
one kernel of the spec per `--waves` value, each making its order (`kernel_inputs.tile_order`) with that many
waves of tail at its first call and keeping it (the tables are reused while the captured tensors are), timed
paired (cubridge/tools/timing.py) against the first; the outputs must be bit-identical, since the order decides
which CTA runs a tile, never what it computes. Inputs as `cubridge bench` makes them (`grow_captures`).

  python3 benchmarks/tile_order_ab.py --spec examples/specs/interleaved_documents.py \
      --configs llama2-7b,qwen2.5-72b --seqlens 4k,8k --waves 0,3,4 --rounds 15
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.runtime import kernel_inputs  # noqa: E402
from cubridge.runtime.variant import build_variant  # noqa: E402
from cubridge.tools.bench import (CONFIGS, TOKENS, grow_captures, hooks_on_gpu, parse_configs,  # noqa: E402
                                  parse_seqlens)
from cubridge.tools.timing import quartiles, speedup, time_paired  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--configs", type=parse_configs, default="llama2-7b")
    parser.add_argument("--seqlens", type=parse_seqlens, default="4k,8k")
    parser.add_argument("--waves", default="0,4", help="tail waves of each order; the first is the baseline")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    waves = [int(w) for w in args.waves.split(",")]
    shipped = kernel_inputs.TAIL_WAVES
    for config in args.configs:
        heads_q, heads_kv, head_dim = CONFIGS[config]
        for seqlen in args.seqlens:
            batch = max(1, TOKENS // seqlen)
            torch.manual_seed(0)
            q = torch.randn(batch, heads_q, seqlen, head_dim, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(batch, heads_kv, seqlen, head_dim, device="cuda", dtype=torch.bfloat16)
                    for _ in range(2))
            kernels, outputs = {}, {}
            try:
                for count in waves:
                    kernel = build_variant(args.spec, "sm90")
                    grow_captures(kernel.spec, seqlen)
                    hooks_on_gpu(kernel.spec)
                    kernel_inputs.TAIL_WAVES = count  # read when the kernel makes its order, at its first call
                    outputs[count] = kernel(q, k, v)
                    kernels[f"tail {count}"] = kernel
            finally:
                kernel_inputs.TAIL_WAVES = shipped
            if not all(torch.equal(outputs[waves[0]], out) for out in outputs.values()):
                raise SystemExit("the orders' outputs differ: an order changed what a tile computes")
            launchers = {name: (lambda kernel=kernel: kernel(q, k, v)) for name, kernel in kernels.items()}
            times = time_paired(launchers, args.rounds, 3)
            baseline = next(iter(launchers))
            print(f"\n{Path(args.spec).stem} {config} S={seqlen} B={batch} (outputs identical)")
            print(f"| order | ms | speed-up vs {baseline} (q1, median, q3) |")
            print("|---|---|---|")
            for name, values in times.items():
                ratio = " / ".join(f"{r:.3f}" for r in speedup(times, baseline, name))
                print(f"| {name} | {quartiles(values)[1]:.4f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
