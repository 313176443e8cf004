"""Small launches of nine variant kernels (document mask with block lists, softcap, sigmoid, prefix LM, ALiBi with
its position bias and captured slopes, interleaved documents on 100 keys, where the last query tile keeps no key:
the Hopper kernel skips it and writes its rows and LSE from the producer; share-question and global plus sliding
window, whose Hopper block lists come with keep() bits built from an index-only mask; sliding window with softcap,
whose Hopper kernel retires P V at the top of the next step: `kRetireAtStepTop`) on both references, at every head
dim each serves (sm90: 64, 128 and 256; sm80: 64 and 128), and again on 256 query rows (two query tiles) where the
variant runs in K/V pairs (softcap and sigmoid at sm90 D = 128), for compute-sanitizer:
`compute-sanitizer --tool memcheck --report-api-errors no python3 benchmarks/sanitize_variants.py` (and --tool
racecheck; without --report-api-errors no, memcheck also counts the libraries' probing of cuGetProcAddress).
Names of examples/specs given as arguments replace the nine. Every mbarrier wait is bounded, as in
sanitize_attention.py."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sanitize_attention import bound_mbarrier_waits  # noqa: E402
from cubridge.runtime.variant import build_variant  # noqa: E402

SPECS = ("document_mask", "softcap", "sigmoid", "prefix_lm", "alibi", "interleaved_documents", "share_question",
         "global_sliding_window", "sliding_window_softcap")
KEYS = {"interleaved_documents": 100}  # keys 0-99 hold document 0 only; queries 256-299 are document 1


def main(names: list[str]) -> None:
    bound_mbarrier_waits()
    torch.manual_seed(0)
    for name in names:
        for reference in ("sm90", "sm80"):
            kernel = build_variant(f"examples/specs/{name}.py", reference)
            for head_dim in kernel.head_dims:
                paired = kernel.lowered("bf16", head_dim).instances[0].pair_name is not None
                for seqlen_q in (300, 256) if paired else (300,):
                    q = torch.randn(2, 4, seqlen_q, head_dim, device="cuda", dtype=torch.bfloat16)
                    k = torch.randn(2, 2, KEYS.get(name, 450), head_dim, device="cuda", dtype=torch.bfloat16)
                    kernel(q, k, k.clone(), return_lse=kernel.spec.normalization == "softmax")
                    torch.cuda.synchronize()
                    print(f"{name} {reference} D={head_dim} SQ={seqlen_q}: ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SPECS))
