"""Variants in K/V pairs against the same variants unpaired (GPU-only): each spec's Hopper variant launched as the
host ships it (pairs where its work tiles of a head visit the same kv tiles) and with attention_sm90.KV_PAIRS off,
in paired bursts (cubridge/tools/timing.py: median of per-round time ratios, quartiles) and, with --seconds, under
sustained load at the power cap (sustained_power.py's sampling: TFLOPS, W, TFLOPS/W, SM clock; rounds interleaved).

  python3 benchmarks/variant_pairs.py examples/specs/softcap.py [SPEC ...] [--seqlen 8192] [--batch 2]
                                      [--heads 32 --heads-kv 32] [--rounds 30] [--seconds 4 --sustained-rounds 2]

Both forms are checked to give the same bits before timing."""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sustained_power import sustained  # noqa: E402
from cubridge.runtime.variant import build_variant  # noqa: E402
from cubridge.tools.timing import quartiles, speedup, time_paired  # noqa: E402

sm90_host = importlib.import_module("cubridge.runtime.attention_sm90")  # the module: the package exports the function
HEAD_DIM = 128  # the pairs' head dim


def launchers(spec: str, q, k, v) -> dict[str, callable]:
    """"pairs" and "unpaired": the spec's variant, built twice so that each keeps the launch plan made for its form
    (checked to be paired or not, and to give the same bits)."""
    runs, outputs = {}, {}
    shipped = sm90_host.KV_PAIRS
    for name, pairs in (("pairs", True), ("unpaired", False)):
        kernel = build_variant(spec, "sm90")
        sm90_host.KV_PAIRS = pairs
        try:
            outputs[name] = kernel(q, k, v)
        finally:
            sm90_host.KV_PAIRS = shipped
        (plan,) = kernel._plans.values()
        if (plan.kernel.cluster_ctas == sm90_host.PAIR_CTAS) != pairs:
            raise SystemExit(f"variant_pairs: {spec}: the {name} launch is {'not ' if pairs else ''}in pairs "
                             "(a variant whose tiles visit different kv ranges, or an odd number of query tiles)")
        runs[name] = lambda kernel=kernel: kernel(q, k, v)
    if not torch.equal(outputs["pairs"], outputs["unpaired"]):
        raise SystemExit(f"variant_pairs: {spec}: the pairs' output differs from the unpaired launch's")
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", type=Path)
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=30, help="paired burst rounds")
    parser.add_argument("--warmup-rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.0, help="sustained runs of this length (0: none)")
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--sustained-rounds", type=int, default=2)
    args = parser.parse_args()
    missing = [str(spec) for spec in args.specs if not spec.is_file()]
    if missing:
        raise SystemExit(f"variant_pairs: no spec file {', '.join(missing)}")
    if args.seconds and args.settle >= args.seconds:
        raise SystemExit("variant_pairs: --settle must be shorter than --seconds")
    heads_kv = args.heads_kv or args.heads
    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(args.batch, heads, args.seqlen, HEAD_DIM, device="cuda", generator=generator)
               .to(torch.bfloat16) for heads in (args.heads, heads_kv, heads_kv))
    flops = 4.0 * args.batch * args.heads * args.seqlen * args.seqlen * HEAD_DIM
    runs = {(spec.stem, form): run for spec in args.specs for form, run in launchers(str(spec), q, k, v).items()}
    print(f"B={args.batch} HQ={args.heads} HKV={heads_kv} S={args.seqlen} D={HEAD_DIM} bf16")
    print(f"\n{args.rounds} paired burst rounds: pairs against unpaired, median of per-round ratios [quartiles]")
    print("| spec | pairs TFLOPS | unpaired TFLOPS | pairs vs unpaired |")
    print("|---|---|---|---|")
    for spec in args.specs:
        times = time_paired({form: runs[spec.stem, form] for form in ("pairs", "unpaired")}, args.rounds,
                            args.warmup_rounds)
        low, mid, high = speedup(times, "unpaired", "pairs")
        tflops = {form: flops / quartiles(times[form])[1] / 1e9 for form in times}
        print(f"| {spec.stem} | {tflops['pairs']:.1f} | {tflops['unpaired']:.1f} | {100 * (mid - 1):+.2f}% "
              f"[{100 * (low - 1):+.2f}, {100 * (high - 1):+.2f}] |", flush=True)
    if not args.seconds:
        return 0
    cells = list(runs)
    results = {cell: [] for cell in cells}
    for round_index in range(args.sustained_rounds):
        for cell in cells[round_index % len(cells):] + cells[:round_index % len(cells)]:
            measured = sustained(runs[cell], args.seconds, args.settle)
            measured["tflops"] = flops * measured["calls_per_s"] / 1e12
            results[cell].append(measured)
    print(f"\nsustained: {args.seconds:g} s runs, {args.sustained_rounds} rounds interleaved (means)")
    print("| spec | form | TFLOPS | W | TFLOPS/W | SM MHz |")
    print("|---|---|---|---|---|---|")
    for (spec, form), rows in results.items():
        tflops, watts, mhz = (statistics.mean(r[key] for r in rows) for key in ("tflops", "watts", "mhz"))
        print(f"| {spec} | {form} | {tflops:.1f} | {watts:.0f} | {tflops / watts:.3f} | {mhz:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
