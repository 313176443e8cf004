"""A/B timing of attention kernel source variants in one process (GPU-only): each variant is a shipped kernel
(attention_sm80.cu or attention_sm90.cu) with text substitutions, compiled to its own cubin and launched
through that kernel's host code. Variants marked diag compute wrong results on purpose (a stage left out, to
see what it costs); the others are checked against the shipped kernel's output.

  python3 benchmarks/ab_variants.py [--kernel sm90] [--seqlen 8192] [--batch 2] [--variants a,b] [--passes 2]
                                    [--extra NAME=FILE.cu ...]

--extra adds a variant whose source is a whole file (an earlier version of the kernel, say); it is checked
against the shipped kernel like the substitution variants.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.runtime.compiler import compile_cubin  # noqa: E402
from cubridge.runtime.reference import causal_density  # noqa: E402

# The host modules (cubridge.runtime re-exports their launch functions under the same names).
_sm80 = importlib.import_module("cubridge.runtime.attention")
_sm90 = importlib.import_module("cubridge.runtime.attention_sm90")

# Rescale O only when some row of the warp raised its max (alpha != 1): bit-identical results, since
# alpha == exp2(0) == 1 exactly when the max did not move.
_SM90_CONDITIONAL_RESCALE = (
    "      rescale_rows(o, alpha);\n",
    "      if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) "
    "rescale_rows(o, alpha);\n")
_SM80_LOOP = ("#pragma unroll\n      for (int dt = 0; dt < kHeadDim / 8; ++dt) {\n"
              "        out[mt][dt][2 * half] *= correction;")
_SM80_CONDITIONAL_RESCALE = (_SM80_LOOP, "if (__any_sync(0xffffffffu, correction != 1.f))\n" + _SM80_LOOP)


def _sm90_skip_loads_after_fill(operand: str) -> tuple[str, str]:
    """The producer loads K or V only until the stages are filled, then arrives on the full barrier without a
    copy: the consumers reuse stale tiles, and no bytes of that operand leave L2."""
    issue = f"      if (leader)\n        load_kv_tile<kHeadDim>(smem.{operand}_tile(stage)"
    skip = (f"      if (leader && kv.count >= kStages) mbarrier_arrive(smem.{operand}_full(stage));\n"
            f"      else if (leader)\n        load_kv_tile<kHeadDim>(smem.{operand}_tile(stage)")
    return issue, skip


# kernel -> name -> (diag, [(old, new), ...])
VARIANTS: dict[str, dict[str, tuple[bool, list[tuple[str, str]]]]] = {
    "sm90": {
        "shipped": (False, []),
        "conditional-rescale": (False, [_SM90_CONDITIONAL_RESCALE]),
        "head-chunk-8": (False, [("const int head_chunk = p.head_chunk;", "const int head_chunk = 8;")]),
        "static-schedule": (False, [("return p.tile_counter != nullptr;", "return false;")]),
        "diag-no-exp2": (True, [("s[e] = fast_exp2(fmaf(s[e], scale_log2, -max_scaled));",
                                 "s[e] = fmaf(s[e], scale_log2, -max_scaled);")]),
        "diag-no-kv-loads": (True, [_sm90_skip_loads_after_fill("k"), _sm90_skip_loads_after_fill("v")]),
        "diag-no-k-loads": (True, [_sm90_skip_loads_after_fill("k")]),
        "diag-no-v-loads": (True, [_sm90_skip_loads_after_fill("v")]),
        "diag-no-pingpong": (True, [
            ("  named_barrier_sync(kTurnBarrier0 + group, kConsumerGroups * kWarpGroupThreads);\n", ""),
            ("  named_barrier_arrive(kTurnBarrier0 + (1 - group), kConsumerGroups * kWarpGroupThreads);\n", ""),
            ("  if (group == 1) named_barrier_arrive(kTurnBarrier0, kConsumerGroups * kWarpGroupThreads);", ""),
        ]),
    },
    "sm80": {
        "shipped": (False, []),
        "conditional-rescale": (False, [_SM80_CONDITIONAL_RESCALE]),
    },
}
# kernel -> (host module, launch function)
KERNELS = {"sm80": (_sm80, _sm80.attention_sm80), "sm90": (_sm90, _sm90.attention_sm90)}


def variant_source(directory: Path, name: str, substitutions, base: Path) -> Path:
    text = base.read_text()
    for old, new in substitutions:
        if old not in text:
            raise SystemExit(f"ab_variants: variant {name}: pattern not found: {old.strip()[:60]}")
        text = text.replace(old, new)
    path = directory / f"{base.stem}_{name.replace('-', '_')}.cu"
    path.write_text(text)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=sorted(VARIANTS), default="sm90")
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--passes", type=int, default=2, help="interleaved passes over the variants")
    parser.add_argument("--variants", default=None, help="comma-separated (default: all of the kernel's)")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE",
                        help="a variant whose source is FILE (repeatable)")
    args = parser.parse_args()
    variants = dict(VARIANTS[args.kernel])
    host, run = KERNELS[args.kernel]
    extra_files = {}
    for item in args.extra:
        name, _, file = item.partition("=")
        if not name or not Path(file).is_file():
            raise SystemExit(f"ab_variants: --extra {item!r}: expected NAME=FILE with an existing file")
        extra_files[name] = Path(file)
        variants[name] = (False, [])
    from triton.testing import do_bench

    chosen = args.variants.split(",") if args.variants is not None else list(VARIANTS[args.kernel])
    names = [n for n in chosen if n] + list(extra_files)
    unknown = [n for n in names if n not in variants]
    if unknown:
        raise SystemExit(f"ab_variants: no {args.kernel} variant named {', '.join(unknown)}")
    generator = torch.Generator(device="cuda").manual_seed(0)
    shape = (args.batch, args.heads, args.seqlen, 128)
    sets = [tuple(torch.randn(shape, generator=generator, device="cuda").bfloat16() for _ in range(3))
            for _ in range(3)]
    flops_full = 4.0 * args.batch * args.heads * args.seqlen * args.seqlen * 128
    capability = torch.cuda.get_device_capability()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        compiled = {name: compile_cubin(variant_source(Path(scratch), name, variants[name][1],
                                                       extra_files.get(name, host.SOURCE)), capability)
                    for name in names}
        reference = {}
        # Passes over the variants, interleaved, to see the run-to-run spread.
        for repetition, name, causal in itertools.product(range(args.passes), names, (False, True)):
            host._compiled = lambda capability, kernel=compiled[name]: kernel
            q, k, v = sets[0]
            out = run(q, k, v, causal=causal)
            if name == "shipped":
                reference[causal] = out
            elif not variants[name][0] and causal in reference:
                error = (out.float() - reference[causal].float()).abs().max().item()
                if error > 0:
                    print(f"{name} causal={causal}: differs from shipped by {error:.2e}")
            rotation = itertools.cycle(sets)
            ms = do_bench(lambda: run(*next(rotation), causal=causal), warmup=50, rep=200,
                          return_mode="median")
            density = causal_density(args.seqlen, args.seqlen) if causal else 1.0
            results.setdefault((name, causal), []).append(flops_full * density / ms / 1e9)
    print(f"\n| {args.kernel} variant | full TFLOP/s | causal TFLOP/s |  "
          f"(B{args.batch} H{args.heads} S{args.seqlen} D128 bf16)")
    print("|---|---|---|")
    for name in names:
        full = " / ".join(f"{x:.1f}" for x in results[(name, False)])
        causal = " / ".join(f"{x:.1f}" for x in results[(name, True)])
        print(f"| {name}{' (diag)' if variants[name][0] else ''} | {full} | {causal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
