"""Attention forward benchmark: correctness against float64 first, then median time, on one CUDA GPU.

For each config (B, HQ, HKV, SQ, SKV, D), variant (full, causal) and provider:
  1. correctness: on batch 0, first and last query head (and their key/value heads), max |out - float64
     reference| must be <= 2 * that of eager PyTorch in the same dtype + 1e-3 (FlashAttention's criterion with
     an absolute slack for outputs whose eager error rounds to 0). A provider that fails is not timed.
  2. time: the providers that passed are timed together, paired (cubridge/tools/timing.py: every round launches
     each once, in a rotating order, after an L2 flush, so power-cap drift reaches all alike); each reports
     its median and its speed-up against the first provider (median and quartiles of per-round ratios).
     Absolute figures depend on what is interleaved: a slower, lower-power provider lets the chip run further
     from its power cap (docs/performance.md, run 56), so compare providers by their speed-ups.
     Inputs rotate over enough sets that one rotation is >= 3x the L2, so no call finds its inputs in cache.
  3. TFLOPS = 4 * B * HQ * SQ * SKV * D * density / time, density = exact fraction of kept (q, kv) pairs
     (top-left causal: sum_i min(i + 1, SKV) / (SQ * SKV)).
Writes results.json, results.md and results.png to --out. GPU-only.

  python benchmarks/bench_attention.py --preset h200-target --out bench-out
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.tools.timing import quartiles, speedup, time_paired  # noqa: E402
from cubridge.runtime import attention_sm80, attention_sm90  # noqa: E402
from cubridge.runtime.reference import causal_density, reference_attention  # noqa: E402

ABS_SLACK = 1e-3
L2_ROTATION_FACTOR = 3
MAX_ROTATION_SETS = 8
EAGER_MAX_SCORES = 2**32  # B * HQ * SQ * SKV above this: eager skipped (tens of GB of scores, minutes per call)
VARIANTS = ("full", "causal")
TIMING_BUDGET_MS = 1000.0  # paired rounds per (config, variant): about this much launch time in all
MIN_ROUNDS, MAX_ROUNDS, WARMUP_ROUNDS = 10, 100, 3


@dataclass(frozen=True)
class Config:
    batch: int
    heads_q: int
    heads_kv: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int

    @property
    def label(self) -> str:
        return (f"B{self.batch} HQ{self.heads_q} HKV{self.heads_kv} SQ{self.seqlen_q} SKV{self.seqlen_k} "
                f"D{self.head_dim}")

    def flops(self, causal: bool) -> float:
        density = causal_density(self.seqlen_q, self.seqlen_k) if causal else 1.0
        return 4.0 * self.batch * self.heads_q * self.seqlen_q * self.seqlen_k * self.head_dim * density


PRESETS = {
    # B * S = 16k tokens, 32 heads, D = 128: the H200 target sweep.
    "h200-target": [Config(16384 // s, 32, 32, s, s, 128) for s in (512, 1024, 2048, 4096, 8192, 16384)],
    "h200-8k": [Config(2, 32, 32, 8192, 8192, 128)],
    # D = 64, B * S = 16k tokens, 32 heads (a 2048-wide model).
    "h200-d64": [Config(16384 // s, 32, 32, s, s, 64) for s in (1024, 4096, 16384)],
    # D = 256 (attention_sm90 only), B * S = 16k tokens, 16 heads (a 4096-wide model).
    "h200-d256": [Config(16384 // s, 16, 16, s, s, 256) for s in (1024, 4096, 16384)],
    "mixed": [Config(4, 32, 8, 2048, 2048, 128), Config(8, 16, 16, 2048, 2048, 64),
              Config(2, 32, 32, 3000, 5000, 128)],
}

Provider = Callable[[Config, bool], Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]


def cubridge_sm80(config: Config, causal: bool):
    return lambda q, k, v: attention_sm80(q, k, v, causal=causal)


def cubridge_sm90(config: Config, causal: bool):
    return lambda q, k, v: attention_sm90(q, k, v, causal=causal)


def sdpa_backend(backend_name: str) -> Provider:
    def factory(config: Config, causal: bool):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention

        backend = getattr(SDPBackend, backend_name)
        gqa = config.heads_q != config.heads_kv

        def run(q, k, v):
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        return run

    return factory


def flex(config: Config, causal: bool):
    """flex_attention under torch.compile, compiled afresh for this config: dynamo's per-function recompile
    limit (8) would otherwise send later shapes to the uncompiled fallback, 20-50x slower."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()
    compiled_flex = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, B=None, H=None,
                                       Q_LEN=config.seqlen_q, KV_LEN=config.seqlen_k, device="cuda")
    gqa = config.heads_q != config.heads_kv
    return lambda q, k, v: compiled_flex(q, k, v, block_mask=block_mask, enable_gqa=gqa)


def eager(config: Config, causal: bool):
    return lambda q, k, v: reference_attention(q, k, v, causal, compute_dtype=q.dtype, return_lse=False)[0]


PROVIDERS: dict[str, Provider] = {
    "cubridge-sm80": cubridge_sm80,
    "cubridge-sm90": cubridge_sm90,
    "sdpa-flash": sdpa_backend("FLASH_ATTENTION"),
    "sdpa-cudnn": sdpa_backend("CUDNN_ATTENTION"),
    "flex-compiled": flex,
    "eager": eager,
}


def make_inputs(config: Config, dtype: torch.dtype, generator: torch.Generator):
    def draw(heads, seqlen):
        shape = (config.batch, heads, seqlen, config.head_dim)
        return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)

    return draw(config.heads_q, config.seqlen_q), draw(config.heads_kv, config.seqlen_k), draw(
        config.heads_kv, config.seqlen_k)


def rotation_count(config: Config, dtype: torch.dtype) -> int:
    element = torch.tensor([], dtype=dtype).element_size()
    set_bytes = element * config.batch * config.head_dim * (
        2 * config.heads_q * config.seqlen_q + 2 * config.heads_kv * config.seqlen_k)
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    return max(1, min(MAX_ROTATION_SETS, math.ceil(L2_ROTATION_FACTOR * l2_bytes / set_bytes)))


def checked_heads(config: Config, q, k, v):
    """Batch 0, first and last query head with the key/value heads they read (GQA keeps h -> h // group)."""
    q_heads = [0, config.heads_q - 1]
    kv_heads = [0, config.heads_kv - 1]
    return q_heads, q[:1, q_heads], k[:1, kv_heads], v[:1, kv_heads]


def check_correctness(run, config: Config, causal: bool, q, k, v, exact, eager_error) -> dict:
    out = run(q, k, v)
    q_heads = [0, config.heads_q - 1]
    error = (out[:1, q_heads].double() - exact).abs().max().item()
    finite = bool(torch.isfinite(out[:1, q_heads]).all())
    bound = 2 * eager_error + ABS_SLACK
    return {"max_abs_error": error, "bound": bound, "passed": finite and error <= bound}


def run_benchmark(configs: list[Config], variants: list[str], provider_names: list[str],
                  dtype: torch.dtype) -> list[dict]:
    from rich.progress import Progress

    results = []
    generator = torch.Generator(device="cuda").manual_seed(0)
    with Progress() as progress:
        task = progress.add_task("benchmark", total=len(configs) * len(variants) * len(provider_names))
        for config, variant in itertools.product(configs, variants):
            causal = variant == "causal"
            sets = [make_inputs(config, dtype, generator) for _ in range(rotation_count(config, dtype))]
            q, k, v = sets[0]
            _, q_sub, k_sub, v_sub = checked_heads(config, q, k, v)
            exact, _ = reference_attention(q_sub, k_sub, v_sub, causal)
            eager_sub, _ = reference_attention(q_sub, k_sub, v_sub, causal, compute_dtype=dtype, return_lse=False)
            eager_error = (eager_sub.double() - exact).abs().max().item()
            del eager_sub
            records, runs = {}, {}
            for name in provider_names:
                progress.update(task, description=f"{name} {variant} {config.label}")
                record = {"provider": name, "variant": variant, "config": asdict(config), "label": config.label,
                          "rotation_sets": len(sets), "eager_max_abs_error": eager_error}
                scores = config.batch * config.heads_q * config.seqlen_q * config.seqlen_k
                if name == "eager" and scores > EAGER_MAX_SCORES:
                    record["skipped"] = f"eager skipped: {scores:.2e} scores > {EAGER_MAX_SCORES:.2e}"
                else:
                    run = PROVIDERS[name](config, causal)
                    record.update(check_provider(run, config, causal, sets[0], exact, eager_error))
                    if "skipped" not in record:
                        runs[name] = run
                records[name] = record
                progress.advance(task)
            if runs:
                progress.update(task, description=f"timing {variant} {config.label}")
                for name, record in time_providers(runs, sets, config, causal).items():
                    records[name].update(record)
            for record in records.values():
                progress.console.print(summary_line(record))
            results.extend(records.values())
            del sets, q, k, v, q_sub, k_sub, v_sub, exact, runs
            torch.cuda.empty_cache()
    return results


def check_provider(run, config: Config, causal: bool, inputs, exact, eager_error) -> dict:
    """The correctness record of one provider; "skipped" says why it is not timed."""
    try:
        record = check_correctness(run, config, causal, *inputs, exact, eager_error)
    except Exception as error:  # a provider that cannot run this config is reported, not fatal
        return {"skipped": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
    if not record["passed"]:
        return record | {"skipped": "failed correctness; not timed"}
    return record


def time_providers(runs: dict, sets, config: Config, causal: bool) -> dict[str, dict]:
    """Paired timing of the providers in `runs` (the first is the speed-up baseline); rounds sized so that
    the timed launches take about TIMING_BUDGET_MS."""
    rotations = {name: itertools.cycle(sets) for name in runs}
    launchers = {name: (lambda run=run, rotation=rotations[name]: run(*next(rotation))) for name, run in runs.items()}
    probe = time_paired(launchers, rounds=1, warmup_rounds=1)
    round_ms = sum(times[0] for times in probe.values())
    rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, math.ceil(TIMING_BUDGET_MS / round_ms)))
    times = time_paired(launchers, rounds, WARMUP_ROUNDS)
    baseline = next(iter(runs))
    records = {}
    for name in runs:
        milliseconds = quartiles(times[name])[1]
        records[name] = {"ms": milliseconds, "tflops": config.flops(causal) / (milliseconds * 1e-3) / 1e12,
                         "rounds": rounds, "speedup_baseline": baseline,
                         "speedup_quartiles": list(speedup(times, baseline, name))}
    return records


def summary_line(record: dict) -> str:
    head = f"{record['provider']:>14} {record['variant']:>6} {record['label']}"
    if "tflops" in record:
        return (f"{head}: {record['ms']:.3f} ms  {record['tflops']:.1f} TFLOPS  {speedup_cell(record)} "
                f"vs {record['speedup_baseline']}  err {record['max_abs_error']:.2e}")
    return f"{head}: {record['skipped']}"


def markdown_table(results: list[dict], provider_names: list[str], cell) -> list[str]:
    """One row per (variant, config), one column per provider; cell(record) is the text, None for no cell."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for record in results:
        text = cell(record)
        if text is not None:
            rows.setdefault((record["variant"], record["label"]), {})[record["provider"]] = text
    lines = ["| variant | config | " + " | ".join(provider_names) + " |", "|---|---|" + "---|" * len(provider_names)]
    for (variant, label), cells in rows.items():
        lines.append(f"| {variant} | {label} | " + " | ".join(cells.get(n, "") for n in provider_names) + " |")
    return lines


def tflops_cell(record: dict) -> str:
    if "tflops" in record:
        return f"{record['tflops']:.1f}"
    return "FAIL" if record.get("passed") is False else "skip"


def speedup_cell(record: dict) -> str | None:
    if "speedup_quartiles" not in record:
        return None
    low, mid, high = record["speedup_quartiles"]
    return f"x{mid:.3f} [{low:.3f}, {high:.3f}]"


def write_markdown(results: list[dict], provider_names: list[str], path: Path, header: str) -> None:
    lines = [header, ""]
    lines += markdown_table(results, provider_names, tflops_cell)
    lines += ["", "TFLOPS (median); FAIL = failed the correctness check (not timed); skip = not run, reason below.",
              ""]
    lines += markdown_table(results, provider_names, speedup_cell)
    lines += ["", "Speed-up against the first provider timed: median [quartiles] of per-round time ratios (paired "
              "timing, cubridge/tools/timing.py).", ""]
    lines += [f"- skip: {r['provider']} {r['variant']} {r['label']}: {r['skipped']}" for r in results
              if "skipped" in r and r.get("passed") is not False]
    path.write_text("\n".join(lines) + "\n")


def write_plot(results: list[dict], provider_names: list[str], variants: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(variants), figsize=(6 * len(variants), 4.5), squeeze=False)
    for axis, variant in zip(axes[0], variants):
        for name in provider_names:
            points = [(r["config"]["seqlen_q"], r["tflops"]) for r in results
                      if r["provider"] == name and r["variant"] == variant and "tflops" in r]
            if points:
                xs, ys = zip(*sorted(points))
                axis.plot(xs, ys, marker="o", label=name)
        axis.set_xscale("log", base=2)
        axis.set_xlabel("sequence length (SQ)")
        axis.set_ylabel("TFLOPS")
        axis.set_title(f"{variant}")
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="h200-target")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_attention: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    variants = [v for v in args.variants.split(",") if v]
    provider_names = [p for p in args.providers.split(",") if p]
    unknown = [p for p in provider_names if p not in PROVIDERS] + [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"bench_attention: unknown provider/variant {unknown}; providers: {list(PROVIDERS)}", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name(0)
    results = run_benchmark(PRESETS[args.preset], variants, provider_names, dtype)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "gpu": gpu,
            "torch": torch.__version__, "dtype": args.dtype, "preset": args.preset, "argv": sys.argv,
            "abs_slack": ABS_SLACK}
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    header = f"# attention forward, {gpu}, {args.dtype}, preset {args.preset} ({meta['date'][:10]})"
    write_markdown(results, provider_names, args.out / "results.md", header)
    write_plot(results, provider_names, variants, args.out / "results.png", f"{gpu} {args.dtype} {args.preset}")
    print((args.out / "results.md").read_text())
    return 0 if all(r.get("passed", True) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
