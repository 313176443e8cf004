"""A/B timing of attention kernel source variants in one process (GPU-only): each variant is a shipped kernel
(attention_sm80.cu or attention_sm90.cu) with text substitutions, compiled to its own cubin and launched
through that kernel's host code. Variants marked diag compute wrong results on purpose (a stage left out, to
see what it costs); the others are checked against the shipped kernel's output.

  python3 benchmarks/ab_variants.py [--kernel sm90] [--seqlen 8192] [--batch 2] [--heads 64 --heads-kv 8]
                                    [--head-dim 64] [--variants a,b] [--rounds 60] [--extra NAME=FILE.cu ...]
                                    [--fa4] [--cudnn] [--dtype fp16]

Timing is paired (cubridge/tools/timing.py): each variant is reported against the first by the per-round ratio of
their times (median and quartiles). Naming a variant twice (--variants shipped,shipped) adds an A/A control:
the spread of its ratio is the method's resolution. Host variants (HOST_VARIANTS) launch the shipped kernel
differently.

--extra adds a variant whose source is a whole file (an earlier version of the kernel, say); it is checked
against the shipped kernel like the substitution variants.

--fa4 times FlashAttention-4 (`flash_attn.cute.flash_attn_func`, installed with ../shared/gpu/fa4-wheels.sh) on
the same problem in the same rounds, on its own [B, S, H, D] copies of the inputs; its output is compared with the
shipped kernel's (reported, not required to match bit for bit). --cudnn does the same for SDPA's cuDNN backend.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import sys
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.tools.timing import quartiles, speedup, time_paired  # noqa: E402
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
    # K is issued in the kv loop (pipeline state `kv`), V in the producer's load_v (pipeline state `at`)
    state, stage = ("kv", "stage") if operand == "k" else ("at", "at.stage()")
    issue = f"      else if (leader)\n        load_kv_tile<kHeadDim, kBlockKv>(smem.{operand}_tile({stage})"
    skip = (f"      else if (leader && {state}.count >= kStages)\n        mbarrier_arrive(smem.{operand}_full({stage}));\n"
            f"      else if (leader)\n        load_kv_tile<kHeadDim, kBlockKv>(smem.{operand}_tile({stage})")
    return issue, skip


# The producer prefetches the next tile's Q into L2 once it has issued this tile's last K/V loads (about two kv
# steps before the consumers need Q): Q is read once, so its load at the tile boundary otherwise comes from HBM.
_SM90_Q_PREFETCH = [
    ("template <typename T, int kHeadDim, int kBlockKv, typename Policy>\n__device__ __forceinline__ void producer_mainloop(",
     "__device__ __forceinline__ void tma_prefetch_l2_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3) {\n"
     "  asm volatile(\"cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\\n\" ::\"l\"(map), "
     "\"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(c3) : \"memory\");\n}\n\n"
     "template <typename T, int kHeadDim, int kBlockKv, typename Policy>\n__device__ __forceinline__ void producer_mainloop("),
    ("    linear = __shfl_sync(0xffffffffu, next_linear, 0);\n",
     "    if (leader && scheduler.valid(next_linear)) {\n"
     "      const WorkTile next = scheduler.decode(next_linear);\n"
     "      for (int group = 0; group < kConsumerGroups; ++group)\n"
     "        for (int panel = 0; panel < Layout::kPanels; ++panel)\n"
     "          tma_prefetch_l2_4d(q_map, panel * kPanelCols, next.q_tile * kBlockM + group * kConsumerRows, next.head,\n"
     "                             next.batch);\n"
     "    }\n"
     "    linear = __shfl_sync(0xffffffffu, next_linear, 0);\n"),
]
# The consumer's group index broadcast from lane 0, so that ptxas knows it is warp-uniform and keeps the Q
# descriptors in uniform registers (run 26: 16 R2UR fewer per kv step).
_SM90_UNIFORM_GROUP = ("consumer_mainloop<T, kHeadDim, kBlockKv, Policy>(smem, p, args, o_map, warp_group - 1,",
                       "consumer_mainloop<T, kHeadDim, kBlockKv, Policy>(smem, p, args, o_map, "
                       "__shfl_sync(0xffffffffu, warp_group - 1, 0),")

# mbarrier waits that suspend between polls: try_wait with a suspend-time hint (CUTLASS's and FlashAttention-4's
# form, `TRYWAIT; NANOSLEEP.SYNCS` in SASS) instead of a spinning retry loop, whose polls take issue slots from the
# warps that share the sub-partition (run 184: our producer's stage wait retried about 27 times a kv step).
_SM90_SLEEPING_WAIT = (
    "// Producer: one warp;",
    "__device__ __forceinline__ void mbarrier_wait_sleeping(uint64_t* bar, uint32_t phase) {\n"
    "  uint32_t done = 0;\n"
    "  while (!done)\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\\n\"\n"
    "                 \"selp.u32 %0, 1, 0, p;\\n}\\n\" : \"=r\"(done) : \"r\"(smem_u32(bar)), \"r\"(phase), "
    "\"r\"(0x989680) : \"memory\");\n"
    "}\n\n"
    "// Producer: one warp;")
_SM90_PRODUCER_WAITS = ["mbarrier_wait(smem.q_empty(),", "mbarrier_wait(smem.k_empty(stage),",
                        "mbarrier_wait(smem.v_empty(at.stage()),", "mbarrier_wait(free_barrier,",
                        "mbarrier_wait(values ? smem.v_empty(kv.stage())"]
_SM90_CONSUMER_WAITS = ["mbarrier_wait(smem.q_full(),", "mbarrier_wait(smem.k_full(stage),",
                        "mbarrier_wait(smem.v_full(prev.stage()),", "mbarrier_wait(smem.v_full(last.stage()),"]


def _sm90_sleeping(waits: list[str]) -> list[tuple[str, str]]:
    return [_SM90_SLEEPING_WAIT] + [(wait, wait.replace("mbarrier_wait(", "mbarrier_wait_sleeping(")) for wait in waits]


# Where the K/V pairs' cost in bursts goes (diagnostics, runs 233-234). cluster-only: the pair entry points with
# each CTA loading its own K and V tiles (the cluster launch and its cluster_syncs alone). pairs-no-handshake: a
# stage refilled in both CTAs once this CTA's consumers released it, without waiting for the peer's (racy: times
# only; with it the pairs run at the unpaired speed).
_SM90_PAIR_HANDSHAKE = ("  mbarrier_wait(free_barrier, at.free_parity());\n", "")
_SM90_PAIR_LOADS = "      if constexpr (Policy::kSharesKvInPair)\n        load_pair_kv_tile"


# kernel -> name -> (diag, [(old, new), ...])
VARIANTS: dict[str, dict[str, tuple[bool, list[tuple[str, str]]]]] = {
    "sm90": {
        "shipped": (False, []),
        "conditional-rescale": (False, [_SM90_CONDITIONAL_RESCALE]),
        "q-prefetch-l2": (False, _SM90_Q_PREFETCH),
        "uniform-group": (False, [_SM90_UNIFORM_GROUP]),
        "q-prefetch-l2+uniform-group": (False, [*_SM90_Q_PREFETCH, _SM90_UNIFORM_GROUP]),
        "head-chunk-8": (False, [("const int head_chunk = p.head_chunk;", "const int head_chunk = 8;")]),
        "static-schedule": (False, [("return p.tile_counter != nullptr;", "return false;")]),
        "sleeping-producer-waits": (False, _sm90_sleeping(_SM90_PRODUCER_WAITS)),
        "sleeping-waits": (False, _sm90_sleeping(_SM90_PRODUCER_WAITS + _SM90_CONSUMER_WAITS)),
        "diag-no-exp2": (True, [
            ("          s[e] = fast_exp2(exponent);", "          s[e] = exponent;"),
            ("s[e] = e % kFmaExp2Period == kFmaExp2Period - 1 ? fma_exp2(exponent) : fast_exp2(exponent);",
             "s[e] = exponent;"),
        ]),
        "diag-no-kv-loads": (True, [_sm90_skip_loads_after_fill("k"), _sm90_skip_loads_after_fill("v")]),
        "diag-no-k-loads": (True, [_sm90_skip_loads_after_fill("k")]),
        "diag-no-v-loads": (True, [_sm90_skip_loads_after_fill("v")]),
        "diag-cluster-only": (True, [(_SM90_PAIR_LOADS,
                                      _SM90_PAIR_LOADS.replace("Policy::kSharesKvInPair", "false"))]),
        "diag-pairs-no-handshake": (True, [_SM90_PAIR_HANDSHAKE]),
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
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
KERNELS = {"sm80": (_sm80, _sm80.attention_sm80), "sm90": (_sm90, _sm90.attention_sm90)}


def balanced_grid(tiles: int, sms: int) -> int:
    """The fewest CTAs that run `tiles` equal tiles in as many rounds as one CTA per SM (4096 tiles on 132 SMs:
    128 CTAs of 32 tiles): the idle SMs' share of the power cap goes to the busy ones."""
    rounds = math.ceil(tiles / sms)
    return math.ceil(tiles / rounds)


def grid_per_tile(tiles: int, sms: int) -> int:
    """One CTA per work tile, FA4's non-persistent grid: each CTA runs one tile and exits, and the hardware
    starts the next CTA on the SM it frees (a causal CTA's first claim is then its only one)."""
    return tiles


class HostVariant(NamedTuple):
    """The shipped kernel launched differently: another grid for (tiles, SMs) (None: the host's), on causal
    launches too or on full ones only, with some of the host module's constants set for its launches."""

    grid: Callable[[int, int], int] | None = None
    with_causal: bool = False
    constants: tuple[tuple[str, object], ...] = ()


def use_host_variant(host, variant: HostVariant, causal: bool, tiles: int, defaults: dict[str, object],
                     sm_count: Callable[[int], int]) -> None:
    """Sets the sm90 host module up to launch as `variant` does on a `causal` (or full) mask of `tiles` work tiles:
    its constants over `defaults` and its grid where it applies to that mask, else `defaults` and `sm_count`'s grid.
    Launch plans made before keep their settings: the caller clears them."""
    applies = variant.with_causal or not causal
    for constant, value in (defaults | (dict(variant.constants) if applies else {})).items():
        setattr(host, constant, value)
    grid = variant.grid if applies else None
    host._sm_count = sm_count if grid is None else lambda index: grid(tiles, sm_count(index))


# kernel -> name -> host variant. grid-balanced applies to full masks only (causal tiles are claimed dynamically);
# kv-tile-128 launches every D = 128 full mask with the 128-key kv tiles the host takes below S_K = 8192; unpaired
# launches them one CTA at a time (attention_sm90.KV_PAIRS off), where the host runs them in K/V pairs.
HOST_VARIANTS = {"sm90": {"grid-balanced": HostVariant(balanced_grid),
                          "grid-per-tile": HostVariant(grid_per_tile, with_causal=True),
                          "kv-tile-128": HostVariant(constants=(("WIDE_MIN_SEQLEN_K", 2**31 - 1),)),
                          "unpaired": HostVariant(constants=(("KV_PAIRS", False),))}}


def variant_source(directory: Path, name: str, substitutions, base: Path) -> Path:
    text = base.read_text()
    for old, new in substitutions:
        if old not in text:
            raise SystemExit(f"ab_variants: variant {name}: pattern not found: {old.strip()[:60]}")
        text = text.replace(old, new)
    path = directory / f"{base.stem}_{name.replace('-', '_')}.cu"
    path.write_text(text)
    return path


def unique_names(chosen: list[str]) -> list[str]:
    """Variant names in order, a repeated name suffixed #2, #3 ... (an A/A control of the same source)."""
    seen: dict[str, int] = {}
    names = []
    for name in chosen:
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return names


def base_name(name: str) -> str:
    return name.partition("#")[0]


def source_of(name: str, extra_files: dict[str, Path], shipped: Path) -> Path:
    """The kernel source of variant `name`: an --extra file (its repeats too: `base#2` is an A/A control of
    `base`'s file), else the shipped source, which the substitutions of a named variant edit."""
    return extra_files.get(base_name(name), shipped)


def fa4_launchers(sets) -> dict[bool, object]:
    """causal -> a function running FlashAttention-4 on one input set (its own [B, S, H, D] copies), its output
    viewed as [B, H, S, D] like the variants'."""
    try:
        from flash_attn.cute import flash_attn_func
    except ImportError as error:
        raise SystemExit(f"ab_variants: --fa4 needs FlashAttention-4 (flash_attn.cute): {error}") from None
    transposed = {id(inputs): tuple(t.transpose(1, 2).contiguous() for t in inputs) for inputs in sets}

    def runner(causal: bool):
        def run(inputs):
            result = flash_attn_func(*transposed[id(inputs)], causal=causal)
            return (result[0] if isinstance(result, tuple) else result).transpose(1, 2)
        return run
    return {causal: runner(causal) for causal in (False, True)}


def cudnn_launchers() -> dict[bool, object]:
    """causal -> a function running SDPA's cuDNN backend on one input set."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    def runner(causal: bool):
        def run(inputs):
            q, k, v = inputs
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
        return run
    return {causal: runner(causal) for causal in (False, True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=sorted(VARIANTS), default="sm90")
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=None,
                        help="key/value heads (GQA: a divisor of --heads; default --heads)")
    parser.add_argument("--head-dim", type=int, default=128, choices=sorted(_sm90.BLOCK_N))
    parser.add_argument("--rounds", type=int, default=60, help="timed rounds (each launches every variant once)")
    parser.add_argument("--warmup-rounds", type=int, default=5)
    parser.add_argument("--variants", default=None,
                        help="comma-separated, the first is the baseline (default: all of the kernel's)")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE",
                        help="a variant whose source is FILE (repeatable)")
    parser.add_argument("--fa4", action="store_true",
                        help="time FlashAttention-4's flash_attn_func beside the variants (sm90 only)")
    parser.add_argument("--cudnn", action="store_true", help="time SDPA's cuDNN backend beside the variants")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="the inputs' dtype")
    args = parser.parse_args()
    heads_kv = args.heads if args.heads_kv is None else args.heads_kv
    if heads_kv < 1 or args.heads % heads_kv:
        raise SystemExit(f"ab_variants: --heads-kv {heads_kv} must divide --heads {args.heads}")
    if args.fa4 and args.kernel != "sm90":
        raise SystemExit("ab_variants: --fa4 times FlashAttention-4 beside the sm90 kernel only")
    variants = dict(VARIANTS[args.kernel])
    host, run = KERNELS[args.kernel]
    extra_files = {}
    for item in args.extra:
        name, _, file = item.partition("=")
        if not name or not Path(file).is_file():
            raise SystemExit(f"ab_variants: --extra {item!r}: expected NAME=FILE with an existing file")
        extra_files[name] = Path(file)
        variants[name] = (False, [])
    host_variants = HOST_VARIANTS.get(args.kernel, {})
    variants.update({name: (False, []) for name in host_variants})

    chosen = args.variants.split(",") if args.variants is not None else list(VARIANTS[args.kernel])
    names = unique_names([n for n in chosen if n] + list(extra_files))
    unknown = sorted({base_name(n) for n in names} - set(variants))
    if unknown:
        raise SystemExit(f"ab_variants: no {args.kernel} variant named {', '.join(unknown)}")
    generator = torch.Generator(device="cuda").manual_seed(0)
    shapes = [(args.batch, heads, args.seqlen, args.head_dim) for heads in (args.heads, heads_kv, heads_kv)]
    sets = [tuple(torch.randn(shape, generator=generator, device="cuda").to(DTYPES[args.dtype]) for shape in shapes)
            for _ in range(3)]
    others = {"fa4": fa4_launchers(sets)} if args.fa4 else {}
    if args.cudnn:
        others["cudnn"] = cudnn_launchers()
    flops_full = 4.0 * args.batch * args.heads * args.seqlen * args.seqlen * args.head_dim
    capability = torch.cuda.get_device_capability()
    baseline = names[0]
    sm_count = host._sm_count if host_variants else None
    host_defaults = {name: getattr(host, name) for variant in host_variants.values() for name, _ in variant.constants}
    rows = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as scratch:
        compiled = {}
        for name in names:
            source = source_of(name, extra_files, host.SOURCE)
            substitutions = variants[base_name(name)][1]
            compiled[name] = compile_cubin(variant_source(Path(scratch), base_name(name), substitutions, source),
                                           capability)
        for causal in (False, True):
            rotation = itertools.cycle(sets)

            def launcher(name, inputs=None, causal=causal, rotation=rotation):
                variant = host_variants.get(base_name(name), HostVariant())
                tiles = math.ceil(args.seqlen / host.BLOCK_M) * args.heads * args.batch

                def launch():
                    host._compiled = lambda capability, kernel=compiled[name]: kernel
                    host._PLANS.clear()  # a launch plan holds the function it was made with
                    if host_variants:
                        use_host_variant(host, variant, causal, tiles, host_defaults, sm_count)
                    return run(*(inputs or next(rotation)), causal=causal)
                return launch

            reference = launcher("shipped", sets[0])() if "shipped" in names else None
            for name in names:
                if variants[base_name(name)][0] or reference is None or base_name(name) == "shipped":
                    continue
                error = (launcher(name, sets[0])().float() - reference.float()).abs().max().item()
                if error > 0:
                    print(f"{name} causal={causal}: differs from shipped by {error:.2e}")
            launchers = {name: launcher(name) for name in names}
            for other, runs in others.items():
                if reference is not None:
                    error = (runs[causal](sets[0]).float() - reference.float()).abs().max().item()
                    print(f"{other} causal={causal}: max difference from shipped {error:.2e}")
                launchers[other] = (lambda run=runs[causal], rotation=itertools.cycle(sets): run(next(rotation)))
            times = time_paired(launchers, args.rounds, args.warmup_rounds)
            density = causal_density(args.seqlen, args.seqlen) if causal else 1.0
            for name in launchers:
                rows.setdefault(name, [])
                tflops = flops_full * density / quartiles(times[name])[1] / 1e9
                low, mid, high = speedup(times, baseline, name)
                rows[name].append(f"{tflops:.1f} | {100 * (mid - 1):+.2f}% [{100 * (low - 1):+.2f}, "
                                  f"{100 * (high - 1):+.2f}]")
    print(f"\n{args.rounds} paired rounds, B{args.batch} HQ{args.heads} HKV{heads_kv} S{args.seqlen} D{args.head_dim} {args.dtype}; "
          f"speed-up against {baseline}: median of per-round time ratios [quartiles]")
    print(f"| {args.kernel} variant | full TFLOP/s | full vs {baseline} | causal TFLOP/s | causal vs {baseline} |")
    print("|---|---|---|---|---|")
    for name in rows:
        diag = base_name(name) in variants and variants[base_name(name)][0]
        print(f"| {name}{' (diag)' if diag else ''} | {' | '.join(rows[name])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
