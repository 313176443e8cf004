"""Where a variant kernel's time goes (GPU-only): the spec's lowered kernel beside copies of it with one piece
changed by a text substitution, each compiled to its own cubin and launched through the variant runtime, timed
paired (cubridge/tools/timing.py) against the shipped lowering and our own causal kernel.

  python3 benchmarks/variant_diagnostics.py --spec examples/specs/document_mask.py --config llama2-7b \
      --seqlens 4k,8k --variants shipped,keep-true,no-mask,static-schedule --rounds 30 [--extra NAME=FILE.cu ...]

--extra adds a variant whose lowered source is a whole file (the same spec lowered by an earlier version of the
project, say), launched with the shipped lowering's kernel inputs and checked against its output (bit for bit, or
within --tolerance). --spec repeats, one process for several specs; {spec} in an --extra file name stands for
each spec's stem:

  python3 benchmarks/variant_diagnostics.py --spec examples/specs/softcap.py --spec examples/specs/comb.py \
      --seqlens 8k --variants shipped --extra old=lowered-before/{spec}.cu --rounds 8

Variants marked (diag) compute wrong results on purpose, to price one piece; the others are checked against
the shipped lowering's output.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.tools.bench import (CONFIGS, TOKENS, Case, density, grow_captures, hooks_on_gpu,  # noqa: E402
                                  parse_seqlens)
from cubridge.tools.timing import quartiles, speedup, time_paired  # noqa: E402
from cubridge.runtime import attention_sm90  # noqa: E402
from cubridge.runtime.compiler import compile_cubin  # noqa: E402
from cubridge.runtime.reference import causal_density  # noqa: E402
from cubridge.runtime.variant import build_variant, source_file  # noqa: E402

# name: (substitutions on the lowered source, schedule override or None, whether results are wrong on purpose).
# A substitution whose target is absent is skipped; a variant none of whose substitutions applies is an error.
VARIANTS = {
    "shipped": ((), None, False),
    # every mask_mod test on partial tiles passes: what the per-score gathers and compares cost (where a mask's
    # bits are loaded, kMaskBits: what their loads cost, the bounds dropped too)
    "keep-true": ((("static_cast<uint32_t>(keep & (8 * (e >> 2) + (e & 1) < key_limit))",
                    "static_cast<uint32_t>(8 * (e >> 2) + (e & 1) < key_limit)"),
                   ("const bool kept = Policy::keep(tile.batch, tile.head, row_of(e), col_of(e), args);",
                    "const bool kept = true;"),
                   ("kept.bits[w] = words[w];", "kept.bits[w] = ~0u;")), None, True),
    # a mask that loads from tables evaluated after the score GEMM's wait, as other masks are
    "late-mask": ((("static constexpr bool kMaskLoads = true;", "static constexpr bool kMaskLoads = false;"),
                   ("static constexpr bool kMaskBits = true;", "static constexpr bool kMaskBits = false;")),
                  None, False),
    # no tile is masked at all (not even the sequence end): what the masked path costs as a whole
    "no-mask": ((("thread_row0, n0, masked, t, kept);", "thread_row0, n0, false, t, kept);"),), None, True),
    # the static persistent schedule instead of claiming tiles from a counter
    "static-schedule": ((), "persistent", False),
}


def _compiled_copy(kernel, substitutions, capability, source=None):
    """The bf16 D=128 instance (its source replaced by `source` if given) with `substitutions` applied, compiled."""
    lowered, _ = kernel.compiled("bf16", 128, capability)
    source = lowered.source if source is None else source
    applied = [old for old, _ in substitutions if old in source]
    if substitutions and not applied:
        raise SystemExit(f"no substitution target found in the lowered source: {substitutions[0][0]!r}")
    for old, new in substitutions:
        source = source.replace(old, new)
    lowered = dataclasses.replace(lowered, source=source)
    return lowered, compile_cubin(source_file(lowered), capability)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", required=True, help="a spec file (repeatable)")
    parser.add_argument("--configs", default="llama2-7b")
    parser.add_argument("--seqlens", type=parse_seqlens, default="4k,8k")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE.cu",
                        help="a whole lowered source; {spec} in FILE stands for each spec's file name stem")
    parser.add_argument("--tolerance", type=float, default=0.0,
                        help="largest absolute difference from the first variant's output that a checked variant "
                             "may have (default 0: bit-identical; a reassociated score_mod rounds differently)")
    args = parser.parse_args()
    capability = torch.cuda.get_device_capability()
    extras = dict(item.split("=", 1) for item in args.extra)
    for spec in args.spec:
        diagnose(args, spec, {name: path.read_text() for name, path in extra_files(extras, spec).items()}, capability)
    return 0


def extra_files(extras: dict[str, str], spec: str) -> dict[str, Path]:
    """--extra's NAME -> FILE for one spec: `{spec}` in FILE stands for the spec file's stem."""
    return {name: Path(path.replace("{spec}", Path(spec).stem)) for name, path in extras.items()}


def diagnose(args, spec: str, extra_sources: dict[str, str], capability: tuple[int, int]) -> None:
    """Times one spec's variants (args.variants and the extra sources) at every config and length asked for."""
    names = args.variants.split(",") + list(extra_sources)
    for config in args.configs.split(","):
        heads_q, heads_kv, head_dim = CONFIGS[config]
        for seqlen in args.seqlens:
            batch = max(1, TOKENS // seqlen)
            kernels = {}
            for name in names:
                substitutions, schedule, _ = VARIANTS.get(name, ((), None, False))
                kernel = build_variant(spec, "sm90")
                grow_captures(kernel.spec, seqlen)
                hooks_on_gpu(kernel.spec)
                lowered, compiled = _compiled_copy(kernel, substitutions, capability, extra_sources.get(name))
                if schedule is not None:
                    lowered = dataclasses.replace(lowered, schedule=schedule)
                kernel._instances[("bf16", 128)] = (lowered, compiled)
                kernels[name] = kernel
            torch.manual_seed(0)
            q = torch.randn(batch, heads_q, seqlen, head_dim, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(batch, heads_kv, seqlen, head_dim, device="cuda", dtype=torch.bfloat16)
                    for _ in range(2))
            launchers = {name: (lambda kernel=kernel: kernel(q, k, v)) for name, kernel in kernels.items()}
            launchers["causal-sm90"] = lambda: attention_sm90(q, k, v, causal=True)
            expected = launchers[names[0]]()
            for name in names[1:]:
                if VARIANTS.get(name, (None, None, False))[2]:
                    continue
                error = (launchers[name]() - expected).abs().max().item()
                if error > args.tolerance:
                    raise SystemExit(f"{name} differs from {names[0]} by {error:.3e} (tolerance {args.tolerance:g})")
            times = time_paired(launchers, args.rounds, 3)
            case = Case(kernels[names[0]].spec.name, config, batch, heads_q, heads_kv, seqlen, head_dim)
            fraction = density(kernels[names[0]].spec, case)
            flops = 4.0 * batch * heads_q * seqlen * seqlen * head_dim
            print(f"\n{kernels[names[0]].spec.name} {config} S={seqlen} B={batch} density {fraction:.4f}")
            print("| variant | ms | TFLOPS | speed-up vs first (q1, median, q3) |")
            print("|---|---|---|---|")
            for name, values in times.items():
                median = quartiles(values)[1]
                work = flops * (causal_density(seqlen, seqlen) if name == "causal-sm90" else fraction)
                ratio = " / ".join(f"{r:.3f}" for r in speedup(times, names[0], name))
                diag = " (diag)" if name in VARIANTS and VARIANTS[name][2] else ""
                print(f"| {name}{diag} | {median:.4f} | {work / median / 1e9:.1f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
