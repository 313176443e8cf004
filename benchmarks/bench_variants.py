"""Variant benchmark: each spec's kernel on the sm90 reference (--reference sm80: the Ampere one), transferred,
lowered and compiled, beside FlexAttention (torch.compile, Triton backend; FLASH backend where FlashAttention-4
is installed), SDPA (cuDNN, or FlashAttention-2 as sdpa-flash) where the variant is plain or causal, eager PyTorch, and our own causal kernel. Correctness first on heads 0 and HQ-1 of batch 0
(FlashAttention's criterion against float64); a provider that fails or cannot run is reported with its reason
and not timed. Then paired timing (benchmarks/timing.py). TFLOPS = 4 B HQ SQ SKV D density / time, density =
the exact fraction of kept (q, kv) pairs. Writes results.json and results.md to --out. GPU-only.

  python benchmarks/bench_variants.py --specs examples/specs/softcap.py --configs llama2-7b --seqlens 4k,8k
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import quartiles, speedup, time_paired  # noqa: E402
from cubridge.frontends.expr import evaluate  # noqa: E402
from cubridge.runtime import attention_sm90  # noqa: E402
from cubridge.runtime.reference import causal_density  # noqa: E402
from cubridge.runtime.variant import build_variant  # noqa: E402
from cubridge.runtime.variant_reference import check_close, spec_attention  # noqa: E402

CONFIGS = {"llama2-7b": (32, 32, 128), "qwen2.5-72b": (64, 8, 128), "llama3.1-405b": (128, 8, 128)}
TOKENS = 16384
EAGER_CHUNK_SCORES = 2**28  # eager runs over chunks of (batch entry, heads) of at most this many scores


def density(spec, batch: int, heads: int, seqlen: int) -> float:
    """Exact fraction of kept (q, kv) pairs (1 without a mask), counted on the GPU row block by row block."""
    if spec.mask_expr is None:
        return 1.0
    captures = {n: t.cuda() for n, t in spec.captures.items()}
    reads_bh = bool(spec.mask_expr.leaves() & {"b", "h"})
    bs, hs = (batch, heads) if reads_bh else (1, 1)
    kept = 0
    step = max(1, 2**26 // (seqlen * bs * hs))
    for start in range(0, seqlen, step):
        env = {"b": torch.arange(bs, device="cuda").view(-1, 1, 1, 1),
               "h": torch.arange(hs, device="cuda").view(1, -1, 1, 1),
               "q_idx": torch.arange(start, min(seqlen, start + step), device="cuda").view(1, 1, -1, 1),
               "kv_idx": torch.arange(seqlen, device="cuda").view(1, 1, 1, -1)} | captures
        keep = evaluate(spec.mask_expr, env)
        kept += keep.expand(bs, hs, env["q_idx"].shape[2], seqlen).sum().item()
    return kept / (bs * hs * seqlen * seqlen)


def eager_chunks(spec, q, k, v, scale):
    """Eager PyTorch attention with the spec's own hooks, one batch entry and group of heads at a time
    (bounded memory): 16-bit matmuls, hooks and normalization in fp32."""
    group = q.shape[1] // k.shape[1]
    heads = max(group, min(q.shape[1], EAGER_CHUNK_SCORES // (q.shape[2] * k.shape[2]) // group * group))
    out = torch.empty_like(q)
    q_idx = torch.arange(q.shape[2], device=q.device).view(1, 1, -1, 1)
    kv_idx = torch.arange(k.shape[2], device=q.device).view(1, 1, 1, -1)
    for b in range(q.shape[0]):
        batch = torch.full((1, 1, 1, 1), b, device=q.device)
        for h in range(0, q.shape[1], heads):
            head = torch.arange(h, min(h + heads, q.shape[1]), device=q.device).view(1, -1, 1, 1)
            kv = slice(h // group, (h + heads) // group)
            keys = k[b:b + 1, kv].repeat_interleave(group, dim=1)
            values = v[b:b + 1, kv].repeat_interleave(group, dim=1)
            scores = (q[b:b + 1, h:h + heads] @ keys.transpose(-1, -2)).float() * scale
            if spec.score_mod is not None:
                scores = spec.score_mod(scores, batch, head, q_idx, kv_idx)
            if spec.mask_mod is not None:
                scores = scores.masked_fill(~spec.mask_mod(batch, head, q_idx, kv_idx), float("-inf"))
            if spec.normalization == "softmax":
                probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            else:
                probs = torch.sigmoid(scores) if spec.normalization == "sigmoid" else torch.relu(scores)
            out[b:b + 1, h:h + heads] = probs.to(q.dtype) @ values
    return out


def grow_captures(spec, length: int) -> None:
    """Document-style captured tensors (1-D integer, shorter than the sequence) regrown to `length`
    positions with seeded document lengths of S/16 to S/4, in the spec and its hooks alike."""
    generator = torch.Generator().manual_seed(length)
    for name, tensor in list(spec.captures.items()):
        if tensor.dim() != 1 or tensor.is_floating_point() or tensor.numel() >= length:
            continue
        lengths = torch.randint(max(1, length // 16), max(2, length // 4), (length,), generator=generator)
        documents = torch.arange(length) % 2 if "kv" in name else torch.arange(length)
        grown = torch.repeat_interleave(documents, lengths)[:length].contiguous()
        spec.captures[name] = grown  # hooks_on_gpu points the hooks at it


def hooks_on_gpu(spec) -> None:
    """Point the spec's hooks at GPU copies of their captured tensors, as a FlexAttention user's would."""
    for hook in (spec.score_mod, spec.mask_mod):
        if hook is None:
            continue
        for name, tensor in spec.captures.items():
            if name in hook.__globals__:
                hook.__globals__[name] = tensor.cuda()


def flex_provider(spec, backend: str | None):
    """FlexAttention compiled with the spec's own hooks (and its BlockMask for the mask)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if spec.normalization != "softmax":
        raise RuntimeError(f"FlexAttention has no {spec.normalization} normalization")
    if spec.path.endswith("eager_causal_softcap.py"):
        raise RuntimeError("the spec is an eager function, not FlexAttention hooks")
    hooks_on_gpu(spec)
    torch._dynamo.reset()
    compiled = torch.compile(flex_attention, dynamic=False)

    def make(q, k, v):
        block_mask = None
        if spec.mask_mod is not None:
            block_mask = create_block_mask(spec.mask_mod, B=None, H=None, Q_LEN=q.shape[2], KV_LEN=k.shape[2],
                                           device="cuda")
        options = {"BACKEND": backend} if backend else None
        gqa = q.shape[1] != k.shape[1]
        return lambda: compiled(q, k, v, score_mod=spec.score_mod, block_mask=block_mask, enable_gqa=gqa,
                                kernel_options=options)

    return make


def sdpa_provider(spec, backend: str):
    """torch SDPA with one backend (CUDNN_ATTENTION, FLASH_ATTENTION: FlashAttention-2) for the variants it
    expresses: plain and causal attention."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    causal = spec.name == "causal"
    if spec.score_expr is not None or (spec.mask_expr is not None and not causal):
        raise RuntimeError("SDPA expresses plain and causal attention only")

    def make(q, k, v):
        def run():
            with sdpa_kernel(getattr(SDPBackend, backend)):
                return scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
        return run

    return make


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", required=True, help="comma-separated spec files")
    parser.add_argument("--configs", default="llama2-7b,qwen2.5-72b")
    parser.add_argument("--seqlens", default="4k,8k")
    parser.add_argument("--providers", default="cubridge,causal-sm90,flex,flex-flash,sdpa-cudnn,eager")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--reference", default="sm90", choices=("sm90", "sm80"), help="the variant's reference kernel")
    parser.add_argument("--out", default="bench-variants")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec_path in args.specs.split(","):
        start = time.perf_counter()
        kernel = build_variant(spec_path, args.reference)
        spec = kernel.spec
        build_seconds = time.perf_counter() - start
        for config_name in args.configs.split(","):
            heads_q, heads_kv, head_dim = CONFIGS[config_name]
            for seqlen_text in args.seqlens.split(","):
                seqlen = int(seqlen_text.rstrip("k")) * (1024 if seqlen_text.endswith("k") else 1)
                batch = max(1, TOKENS // seqlen)
                rows.append(run_case(kernel, spec, config_name, batch, heads_q, heads_kv, seqlen, head_dim,
                                     args.providers.split(","), args.rounds, build_seconds))
                print(json.dumps(rows[-1]), flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    lines = ["| spec | config | S | provider | TFLOPS | vs cubridge | note |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        for name, result in row["providers"].items():
            lines.append(f"| {row['spec']} | {row['config']} | {row['seqlen']} | {name} | "
                         f"{result.get('tflops', '-')} | {result.get('vs_cubridge', '-')} | {result.get('note', '')} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def run_case(kernel, spec, config_name, batch, heads_q, heads_kv, seqlen, head_dim, providers, rounds,
             build_seconds):
    torch.manual_seed(0)
    shape_q = (batch, heads_q, seqlen, head_dim)
    shape_kv = (batch, heads_kv, seqlen, head_dim)
    q = torch.randn(shape_q, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape_kv, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(shape_kv, device="cuda", dtype=torch.bfloat16)
    scale = head_dim**-0.5
    grow_captures(spec, seqlen)
    hooks_on_gpu(spec)
    makers = {}
    notes = {}
    for name in providers:
        try:
            if name == "cubridge":
                makers[name] = lambda q, k, v: (lambda: kernel(q, k, v, scale=scale))
            elif name == "causal-sm90":
                makers[name] = lambda q, k, v: (lambda: attention_sm90(q, k, v, causal=True, scale=scale))
            elif name == "flex":
                makers[name] = flex_provider(spec, None)
            elif name == "flex-flash":
                makers[name] = flex_provider(spec, "FLASH")
            elif name == "sdpa-cudnn":
                makers[name] = sdpa_provider(spec, "CUDNN_ATTENTION")
            elif name == "sdpa-flash":
                makers[name] = sdpa_provider(spec, "FLASH_ATTENTION")
            elif name == "eager":
                makers[name] = lambda q, k, v: (lambda: eager_chunks(spec, q, k, v, scale))
        except Exception as error:  # a provider that cannot express the variant
            notes[name] = str(error).splitlines()[0][:120]
    # correctness on heads 0 and HQ-1 of batch 0
    heads = sorted({0, heads_q - 1})
    group = heads_q // heads_kv
    references = [
        [spec_attention(spec, q[:1, h:h + 1], k[:1, h // group:h // group + 1], v[:1, h // group:h // group + 1],
                        scale, exact=exact, first_head=h)[0] for h in heads]
        for exact in (True, False)
    ]
    exact, eager = (torch.cat(parts, dim=1) for parts in references)
    launchers = {}
    for name, make in makers.items():
        try:
            launcher = make(q, k, v)
            result = launcher()
            torch.cuda.synchronize()
            if name != "causal-sm90":
                ok, error, bound = check_close(result[:1, heads], eager, exact)
                if not ok:
                    notes[name] = f"wrong: error {error:.2e} > {bound:.2e}"
                    continue
            launchers[name] = launcher
        except Exception as error:
            notes[name] = f"failed: {str(error).splitlines()[0][:120]}"
    fraction = density(spec, batch, heads_q, seqlen)
    flops = 4.0 * batch * heads_q * seqlen * seqlen * head_dim * fraction
    causal_flops = 4.0 * batch * heads_q * seqlen * seqlen * head_dim * causal_density(seqlen, seqlen)
    # eager is far slower and allocates tens of GB: timed on its own, a few rounds, after the paired kernels
    eager = launchers.pop("eager", None)
    times = time_paired(launchers, rounds, 3) if launchers else {}
    if eager is not None:
        try:
            times["eager"] = time_paired({"eager": eager}, 3, 1)["eager"]
        except torch.OutOfMemoryError:
            notes["eager"] = "out of memory"
    launchers.clear()
    gc.collect()
    torch.cuda.empty_cache()
    results = {}
    for name in providers:
        if name not in times:
            results[name] = {"note": notes.get(name, "not run")}
            continue
        median = quartiles(times[name])[1]
        own_flops = causal_flops if name == "causal-sm90" else flops
        entry = {"ms": round(median, 4), "tflops": round(own_flops / median / 1e9, 1)}
        if "cubridge" in times and name != "cubridge":
            entry["vs_cubridge"] = round(speedup(times, name, "cubridge")[1], 3)
        results[name] = entry
    return {"spec": spec.name, "config": config_name, "batch": batch, "seqlen": seqlen, "density": round(fraction, 4),
            "build_s": round(build_seconds, 2), "providers": results}


if __name__ == "__main__":
    sys.exit(main())
