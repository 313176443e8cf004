"""cubridge bench: each spec's variant kernel beside FlexAttention, SDPA and eager PyTorch on the GPU.

  cubridge bench examples/specs/softcap.py examples/specs/document_mask.py --seqlens 1k,4k,16k -o bench-out

For every spec, model config and sequence length (batch B = max(1, 16k / S), so B * S = 16k tokens; bf16):

1. correctness first: every provider's output on heads 0 and HQ-1 of batch 0 meets FlashAttention's criterion
   against the float64 reference (at most twice the error of the eager 16-bit computation, plus 1e-3); a
   provider that fails is reported and not timed;
2. paired timing (`cubridge.tools.timing`: each round launches every provider once, rotated, after an L2
   flush); the eager provider is timed apart, after the others, for a few rounds;
3. TFLOPS = 4 B HQ S S D density / median time, density being the exact fraction of kept (q, kv) pairs, and
   each provider's speed-up against the others (per-round time ratios).

Providers: cubridge (the spec's kernel on --reference), flex (FlexAttention compiled, Triton backend, with
its BlockMask), flex-flash (its FLASH backend: needs FlashAttention-4), sdpa-cudnn and sdpa-flash (SDPA's
cuDNN and FlashAttention-2 backends, for plain and causal variants), eager (cubridge.reference, chunked),
cubridge-causal (our own hand-written causal kernel on the same problem, for mask-only variants: its TFLOPS
count the causal density, so that a mask's cost shows against the kernel it was derived from).
A provider that is missing or cannot run a variant is reported with its one-line reason.

Writes DIR/results.json, DIR/results.md (one table per spec and config) and DIR/results.png (TFLOPS against
sequence length, one line per provider, one panel per spec and config). GPU-only.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.files import write_atomically

SUMMARY = "time spec variants beside FlexAttention, SDPA and eager PyTorch on the GPU"
CONFIGS = {"llama2-7b": (32, 32, 128), "qwen2.5-72b": (64, 8, 128), "llama3.1-405b": (128, 8, 128)}
PROVIDERS = ("cubridge", "flex", "flex-flash", "sdpa-cudnn", "sdpa-flash", "eager", "cubridge-causal")
TOKENS = 16384
EAGER_ROUNDS = 3


@dataclass(frozen=True)
class Case:
    """One measured problem."""

    spec: str
    config: str
    batch: int
    heads_q: int
    heads_kv: int
    seqlen: int
    head_dim: int


# ------------------------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", help="spec files")
    parser.add_argument("--configs", type=parse_configs, default=list(CONFIGS),
                        help=f"comma-separated model configs (default all: {','.join(CONFIGS)})")
    parser.add_argument("--seqlens", type=parse_seqlens, default=parse_seqlens("1k,2k,4k,8k,16k"),
                        help="comma-separated sequence lengths, k = 1024 (default 1k,2k,4k,8k,16k)")
    parser.add_argument("--providers", type=parse_providers, default=list(PROVIDERS),
                        help=f"comma-separated providers (default all: {','.join(PROVIDERS)})")
    parser.add_argument("--reference", choices=("sm90", "sm80"), default="sm90",
                        help="the reference program of the cubridge provider (default sm90)")
    parser.add_argument("--rounds", type=_positive, default=20, help="timed rounds (default 20)")
    parser.add_argument("-o", "--output", default="cubridge-bench", help="output directory (default cubridge-bench)")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def parse_configs(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONFIGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown config '{(unknown or [text])[0]}'; choose from {', '.join(CONFIGS)}")
    return names


def parse_seqlens(text: str) -> list[int]:
    lengths = []
    for part in text.split(","):
        part = part.strip().lower()
        digits = part[:-1] if part.endswith("k") else part
        if not digits.isdigit() or int(digits) == 0:
            raise argparse.ArgumentTypeError(f"'{part}' is not a sequence length (as in 512, 4k)")
        lengths.append(int(digits) * (1024 if part.endswith("k") else 1))
    return lengths


def parse_providers(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROVIDERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown provider '{(unknown or [text])[0]}'; choose from {', '.join(PROVIDERS)}")
    return names


def cases(spec_name: str, configs: list[str], seqlens: list[int]) -> list[Case]:
    """The sweep of one spec: configs x sequence lengths, B = max(1, 16k / S)."""
    return [Case(spec_name, config, max(1, TOKENS // seqlen), *CONFIGS[config][:2], seqlen, CONFIGS[config][2])
            for config in configs for seqlen in seqlens]


# ------------------------------------------------------------------------------------------------------------
# Providers
# ------------------------------------------------------------------------------------------------------------


def unavailable(provider: str, spec) -> str | None:
    """Why `provider` cannot run `spec`'s variant here (one line), or None."""
    flexible = provider in ("flex", "flex-flash")
    if flexible and spec.normalization != "softmax":
        return f"FlexAttention has no {spec.normalization} normalization"
    if flexible and any(getattr(hook, "__module__", None) == "cubridge.frontends.spec"
                        for hook in (spec.score_mod, spec.mask_mod)):
        return "the spec is an eager attention function, not FlexAttention hooks"
    if flexible and importlib.util.find_spec("triton") is None:
        return "not installed: FlexAttention's compiled kernels need triton"
    if provider == "flex-flash" and importlib.util.find_spec("flash_attn") is None:
        return "not installed: the FLASH backend needs FlashAttention-4 (flash_attn.cute)"
    if provider.startswith("sdpa") and (spec.score_expr is not None or spec.normalization != "softmax"
                                        or (spec.mask_expr is not None and not is_causal(spec))):
        return "SDPA expresses plain and causal softmax attention only"
    if provider == "cubridge-causal" and (spec.mask_expr is None or spec.score_expr is not None
                                          or spec.normalization != "softmax"):
        return "a comparison for mask-only variants"
    if provider == "sdpa-cudnn" and not torch.backends.cudnn.is_available():
        return "not available: torch has no cuDNN"
    return None


def is_causal(spec, length: int = 300) -> bool:
    """Whether the spec's mask is exactly the top-left causal mask (on a length x length grid, all b, h 0..1)."""
    from cubridge.frontends.expr import evaluate

    if spec.mask_expr is None or set(spec.captures):
        return False
    env = {"b": torch.arange(2).view(-1, 1, 1, 1), "h": torch.arange(2).view(1, -1, 1, 1),
           "q_idx": torch.arange(length).view(1, 1, -1, 1), "kv_idx": torch.arange(length).view(1, 1, 1, -1)}
    keep = evaluate(spec.mask_expr, env).expand(2, 2, length, length)
    return bool(torch.equal(keep, torch.ones(length, length, dtype=torch.bool).tril().expand(2, 2, -1, -1)))


def make_launcher(provider: str, spec, kernel, q, k, v, scale: float):
    """A no-argument callable that runs `provider` on (q, k, v)."""
    gqa = q.shape[1] != k.shape[1]
    if provider == "cubridge":
        return lambda: kernel(q, k, v, scale=scale)
    if provider == "cubridge-causal":
        from cubridge.runtime import attention_sm80, attention_sm90

        causal_kernel = attention_sm90 if kernel.reference == "sm90" else attention_sm80
        return lambda: causal_kernel(q, k, v, causal=True, scale=scale)
    if provider in ("flex", "flex-flash"):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        compiled = torch.compile(flex_attention, dynamic=False)
        block_mask = None
        if spec.mask_mod is not None:
            block_mask = create_block_mask(spec.mask_mod, None, None, q.shape[2], k.shape[2], device=q.device)
        options = {"BACKEND": "FLASH"} if provider == "flex-flash" else None
        return lambda: compiled(q, k, v, score_mod=spec.score_mod, block_mask=block_mask, scale=scale,
                                enable_gqa=gqa, kernel_options=options)
    if provider.startswith("sdpa"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention

        backend = SDPBackend.CUDNN_ATTENTION if provider == "sdpa-cudnn" else SDPBackend.FLASH_ATTENTION
        causal = spec.mask_expr is not None

        def sdpa():
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)
        return sdpa
    from cubridge.reference import attention_reference

    score_mod, mask_mod = spec.broadcast_hooks(q.device)
    return lambda: attention_reference(q, k, v, score_mod, mask_mod, scale=scale, normalization=spec.normalization,
                                       broadcast_hooks=True)


def grow_captures(spec, length: int) -> None:
    """Document-style captured tensors (1-D integer, shorter than the sequence) regrown to `length` positions
    with seeded document lengths of S/16 to S/4 (kv-named ones alternate two documents), in place in the spec
    (`hooks_on_gpu` points the hooks at them)."""
    generator = torch.Generator().manual_seed(length)
    for name, tensor in list(spec.captures.items()):
        if tensor.dim() != 1 or tensor.is_floating_point() or tensor.numel() >= length:
            continue
        lengths = torch.randint(max(1, length // 16), max(2, length // 4), (length,), generator=generator)
        documents = torch.arange(length) % 2 if "kv" in name else torch.arange(length)
        spec.captures[name] = torch.repeat_interleave(documents, lengths)[:length].contiguous()


def hooks_on_gpu(spec) -> None:
    """Point the spec's hooks at GPU copies of their captured tensors, as a FlexAttention user's would."""
    for hook in (spec.score_mod, spec.mask_mod):
        for name, tensor in spec.captures.items():
            if hook is not None and name in getattr(hook, "__globals__", {}):
                hook.__globals__[name] = tensor.cuda()


def density(spec, case: Case) -> float:
    """Exact fraction of kept (q, kv) pairs (1 without a mask), counted on the GPU row block by row block."""
    from cubridge.frontends.expr import evaluate

    if spec.mask_expr is None:
        return 1.0
    captures = {name: tensor.cuda() for name, tensor in spec.captures.items()}
    reads_bh = bool(spec.mask_expr.leaves() & {"b", "h"})
    batch, heads = (case.batch, case.heads_q) if reads_bh else (1, 1)
    seqlen = case.seqlen
    kept = 0
    step = max(1, 2**26 // (seqlen * batch * heads))
    for start in range(0, seqlen, step):
        rows = torch.arange(start, min(seqlen, start + step), device="cuda")
        env = {"b": torch.arange(batch, device="cuda").view(-1, 1, 1, 1),
               "h": torch.arange(heads, device="cuda").view(1, -1, 1, 1),
               "q_idx": rows.view(1, 1, -1, 1), "kv_idx": torch.arange(seqlen, device="cuda").view(1, 1, 1, -1)}
        kept += evaluate(spec.mask_expr, env | captures).expand(batch, heads, len(rows), seqlen).sum().item()
    return kept / (batch * heads * seqlen * seqlen)


# ------------------------------------------------------------------------------------------------------------
# The sweep
# ------------------------------------------------------------------------------------------------------------


def run_case(case: Case, spec, kernel, providers: list[str], rounds: int) -> dict:
    """One case's record: correctness, then paired timing, then TFLOPS and speed-ups."""
    from cubridge.runtime.reference import causal_density
    from cubridge.runtime.variant_reference import check_close, spec_attention
    from cubridge.tools.timing import quartiles, speedup, time_paired

    torch.manual_seed(0)
    q = torch.randn(case.batch, case.heads_q, case.seqlen, case.head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(case.batch, case.heads_kv, case.seqlen, case.head_dim, device="cuda",
                        dtype=torch.bfloat16) for _ in range(2))
    scale = case.head_dim ** -0.5
    grow_captures(spec, case.seqlen)
    hooks_on_gpu(spec)
    notes = {name: reason for name in providers if (reason := unavailable(name, spec))}
    heads = sorted({0, case.heads_q - 1})
    group = case.heads_q // case.heads_kv
    expected = [torch.cat([spec_attention(spec, q[:1, h:h + 1], k[:1, h // group:h // group + 1],
                                          v[:1, h // group:h // group + 1], scale, exact=exact, first_head=h)[0]
                           for h in heads], dim=1) for exact in (True, False)]
    launchers, errors = {}, {}
    for name in providers:
        if name in notes:
            continue
        try:
            launcher = make_launcher(name, spec, kernel, q, k, v, scale)
            out = launcher()
            torch.cuda.synchronize()
        except Exception as error:  # a provider that cannot run this case is reported, not fatal
            notes[name] = f"failed: {type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
            continue
        if name == "cubridge-causal":  # another function: checked by the causal kernel's own tests
            launchers[name], errors[name] = launcher, None
            continue
        ok, error, bound = check_close(out[:1, heads], expected[1], expected[0])
        errors[name] = error
        if not ok:
            notes[name] = f"wrong: max error {error:.2e} > bound {bound:.2e}; not timed"
            continue
        launchers[name] = launcher
    eager = launchers.pop("eager", None)
    times = time_paired(launchers, rounds, 3) if launchers else {}
    if eager is not None:
        try:
            times["eager"] = time_paired({"eager": eager}, EAGER_ROUNDS, 1)["eager"]
        except torch.OutOfMemoryError:
            notes["eager"] = "out of memory"
    launchers.clear()
    gc.collect()
    torch.cuda.empty_cache()
    fraction = density(spec, case)
    flops = 4.0 * case.batch * case.heads_q * case.seqlen * case.seqlen * case.head_dim * fraction
    causal_flops = flops / fraction * causal_density(case.seqlen, case.seqlen) if fraction else 0.0
    results = {}
    for name in providers:
        if name not in times:
            results[name] = {"note": notes.get(name, "not run")}
            continue
        median = quartiles(times[name])[1]
        work = causal_flops if name == "cubridge-causal" else flops
        entry = {"ms": round(median, 4), "tflops": round(work / median / 1e9, 1), "max_error": errors[name]}
        if name == "cubridge-causal":
            entry["note"] = "our causal kernel, same shape, causal density"
        elif name != "cubridge" and "cubridge" in times and name != "eager":
            entry["cubridge_speedup"] = round(speedup(times, name, "cubridge")[1], 3)
        elif name == "eager" and "cubridge" in times:
            entry["cubridge_speedup"] = round(median / quartiles(times["cubridge"])[1], 3)
        results[name] = entry
    return {**case.__dict__, "density": round(fraction, 4), "providers": results}


def run(args: argparse.Namespace) -> int:
    """`cubridge bench`: exit 0 when every case ran (a provider's failure is a result, not an error)."""
    if not torch.cuda.is_available():
        raise CuBridgeError("cubridge bench needs a CUDA GPU (torch.cuda.is_available() is False)")
    from rich.progress import Progress

    from cubridge.frontends.spec import load_spec
    from cubridge.runtime.variant import build_variant

    output = Path(args.output)
    specs = [load_spec(path) for path in args.specs]
    records = []
    with Progress(transient=False) as progress:
        task = progress.add_task("building", total=len(specs) * len(args.configs) * len(args.seqlens))
        for spec in specs:
            torch._dynamo.reset()  # FlexAttention recompiles per spec: past torch.compile's cache limit it runs eager
            progress.update(task, description=f"building {spec.name}")
            start = time.perf_counter()
            kernel = build_variant(spec, args.reference) if "cubridge" in args.providers else None
            build_seconds = round(time.perf_counter() - start, 2)
            for case in cases(spec.name, args.configs, args.seqlens):
                progress.update(task, description=f"{spec.name} {case.config} S={case.seqlen}")
                records.append(run_case(case, spec, kernel, args.providers, args.rounds) | {"build_s": build_seconds})
                progress.console.print(summary_line(records[-1]))
                progress.advance(task)
    write_results(records, args.providers, output)
    print(f"cubridge bench: wrote results.json, results.md, results.png to {output}")
    return 0


# ------------------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------------------


def summary_line(record: dict) -> str:
    cells = [f"{name} {result['tflops']}" if "tflops" in result else f"{name} -"
             for name, result in record["providers"].items()]
    return f"{record['spec']} {record['config']} S={record['seqlen']}: " + ", ".join(cells) + " TFLOPS"


def markdown(records: list[dict], providers: list[str]) -> str:
    """One table per spec and config: TFLOPS per sequence length and provider, cubridge's speed-up against each,
    then every provider's note."""
    lines = ["# cubridge bench", "",
             "TFLOPS (median of paired rounds; 4 B HQ S S D x density / time), and in parentheses cubridge's "
             "speed-up against the provider (median per-round time ratio). bf16, B * S = 16k tokens. "
             "cubridge-causal: our causal kernel on the same problem, at the causal density.", ""]
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record["spec"], record["config"]), []).append(record)
    notes: dict[tuple[str, str], str] = {}
    for (spec, config), group in groups.items():
        heads = f"HQ={group[0]['heads_q']} HKV={group[0]['heads_kv']} D={group[0]['head_dim']}"
        lines += [f"## {spec}, {config} ({heads})", "", "| S | B | density | " + " | ".join(providers) + " |",
                  "|---|---|---|" + "---|" * len(providers)]
        for record in group:
            cells = []
            for name in providers:
                result = record["providers"].get(name, {"note": "not run"})
                if "tflops" not in result:
                    cells.append("-")
                    notes.setdefault((spec, name), result["note"])
                    continue
                ratio = f" ({result['cubridge_speedup']:.2f}x)" if "cubridge_speedup" in result else ""
                cells.append(f"{result['tflops']:.1f}{ratio}")
            lines.append(f"| {record['seqlen']} | {record['batch']} | {record['density']:.3f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    if notes:
        lines += ["Providers not timed:", ""]
        lines += [f"- {spec}, {name}: {note}" for (spec, name), note in notes.items()]
    return "\n".join(lines) + "\n"


def plot(records: list[dict], providers: list[str], path: Path) -> None:
    """TFLOPS against sequence length, one line per provider, one panel per spec and config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((r["spec"], r["config"]) for r in records))
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), squeeze=False)
    for axis, (spec, config) in zip(axes.flat, panels):
        group = [r for r in records if (r["spec"], r["config"]) == (spec, config)]
        for name in providers:
            points = [(r["seqlen"], r["providers"][name]["tflops"]) for r in group
                      if "tflops" in r["providers"].get(name, {})]
            if points:
                axis.plot(*zip(*points), marker="o", label=name)
        axis.set_xscale("log", base=2)
        axis.set_title(f"{spec} ({config})")
        axis.set_xlabel("sequence length")
        axis.set_ylabel("TFLOPS")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    figure.tight_layout()
    from io import BytesIO

    image = BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    write_atomically(path, image.getvalue())


def write_results(records: list[dict], providers: list[str], output: Path) -> None:
    """results.json, results.md and results.png in `output` (created), each written whole."""
    output.mkdir(parents=True, exist_ok=True)
    write_atomically(output / "results.json", json.dumps(records, indent=1) + "\n")
    write_atomically(output / "results.md", markdown(records, providers))
    plot(records, providers, output / "results.png")
