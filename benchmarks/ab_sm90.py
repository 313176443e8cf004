"""A/B timing of attention_sm90 source variants in one process (GPU-only): each variant is the shipped kernel
source with text substitutions, compiled to its own cubin and launched through attention_sm90's host code.
Variants marked diag compute wrong results on purpose (a stage left out, to see what it costs); the others
are checked against the shipped kernel's output.

  python3 benchmarks/ab_sm90.py [--seqlen 8192] [--batch 2] [--variants a,b] [--extra NAME=FILE.cu ...]

--extra adds a variant whose source is a whole file (an earlier version of the kernel, say); it is checked
against the shipped kernel like the substitution variants.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.runtime.attention_sm90 import SOURCE, attention_sm90  # noqa: E402
from cubridge.runtime.compiler import compile_cubin  # noqa: E402

_sm90 = sys.modules["cubridge.runtime.attention_sm90"]

# name -> (diag, [(old, new), ...])
VARIANTS: dict[str, tuple[bool, list[tuple[str, str]]]] = {
    "shipped": (False, []),
    "head-chunk-8": (False, [("const int head_chunk = p.head_chunk;", "const int head_chunk = 8;")]),
    "head-chunk-2": (False, [("const int head_chunk = p.head_chunk;", "const int head_chunk = 2;")]),
    "static-schedule": (False, [("return p.tile_counter != nullptr;", "return false;")]),
    "diag-no-exp2": (True, [("s[e] = fast_exp2(fmaf(s[e], scale_log2, -max_scaled));",
                             "s[e] = fmaf(s[e], scale_log2, -max_scaled);")]),
    "diag-no-pingpong": (True, [
        ("  named_barrier_sync(kTurnBarrier0 + group, kConsumerGroups * kWarpGroupThreads);\n", ""),
        ("  named_barrier_arrive(kTurnBarrier0 + (1 - group), kConsumerGroups * kWarpGroupThreads);\n", ""),
        ("  if (group == 1) named_barrier_arrive(kTurnBarrier0, kConsumerGroups * kWarpGroupThreads);", ""),
    ]),
}


def variant_source(directory: Path, name: str, substitutions, base: Path = SOURCE) -> Path:
    text = base.read_text()
    for old, new in substitutions:
        if old not in text:
            raise SystemExit(f"ab_sm90: variant {name}: pattern not found: {old.strip()[:60]}")
        text = text.replace(old, new)
    path = directory / f"attention_sm90_{name.replace('-', '_')}.cu"
    path.write_text(text)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE",
                        help="a variant whose source is FILE (repeatable)")
    args = parser.parse_args()
    extra_files = {}
    for item in args.extra:
        name, _, file = item.partition("=")
        if not name or not Path(file).is_file():
            raise SystemExit(f"ab_sm90: --extra {item!r}: expected NAME=FILE with an existing file")
        extra_files[name] = Path(file)
        VARIANTS[name] = (False, [])
    from triton.testing import do_bench

    names = [n for n in args.variants.split(",") if n] + list(extra_files)
    generator = torch.Generator(device="cuda").manual_seed(0)
    shape = (args.batch, args.heads, args.seqlen, 128)
    sets = [tuple(torch.randn(shape, generator=generator, device="cuda").bfloat16() for _ in range(3))
            for _ in range(3)]
    flops_full = 4.0 * args.batch * args.heads * args.seqlen * args.seqlen * 128
    capability = torch.cuda.get_device_capability()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        compiled = {name: compile_cubin(variant_source(Path(scratch), name, VARIANTS[name][1],
                                                       extra_files.get(name, SOURCE)), capability)
                    for name in names}
        reference = {}
        # Two passes over the variants, interleaved, to see the run-to-run spread.
        for repetition, name, causal in itertools.product(range(2), names, (False, True)):
            _sm90._compiled = lambda capability, kernel=compiled[name]: kernel
            q, k, v = sets[0]
            out = attention_sm90(q, k, v, causal=causal)
            if name == "shipped":
                reference[causal] = out
            elif not VARIANTS[name][0] and causal in reference:
                error = (out.float() - reference[causal].float()).abs().max().item()
                if error > 0:
                    print(f"{name} causal={causal}: differs from shipped by {error:.2e}")
            rotation = itertools.cycle(sets)
            ms = do_bench(lambda: attention_sm90(*next(rotation), causal=causal), warmup=50, rep=200,
                          return_mode="median")
            density = (args.seqlen + 1) / (2 * args.seqlen) if causal else 1.0
            results.setdefault((name, causal), []).append(flops_full * density / ms / 1e9)
    print(f"\n| variant | full TFLOP/s | causal TFLOP/s |  (B{args.batch} H{args.heads} S{args.seqlen} D128 bf16)")
    print("|---|---|---|")
    for name in names:
        full = " / ".join(f"{x:.1f}" for x in results[(name, False)])
        causal = " / ".join(f"{x:.1f}" for x in results[(name, True)])
        print(f"| {name}{' (diag)' if VARIANTS[name][0] else ''} | {full} | {causal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
