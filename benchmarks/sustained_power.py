"""Work per joule under sustained load (GPU-only): each provider runs back to back for a few seconds while
nvidia-smi samples the board's power draw and SM clock; reports TFLOPS, mean power, TFLOPS per watt and the mean
SM clock, per provider and mask, rounds interleaved so that a drift of the chip's temperature reaches each alike.

  python3 benchmarks/sustained_power.py [--seqlen 8192] [--batch 2] [--heads 32 --heads-kv 32] [--head-dim 128]
                                         [--seconds 4] [--rounds 2] [--fa4] [--cudnn] [--extra NAME=FILE.cu ...]
                                         [--bshd] [--host grid-per-tile ...]

--extra adds a provider whose kernel is another source of attention_sm90.cu (an edited copy), launched through the
same runtime: what a change does to work per joule, where paired bursts (ab_variants.py) run below the power cap.
--bshd adds "cubridge-bshd": the shipped kernel on inputs laid out [B, S, H, D] in memory (FA4's layout, viewed as
[B, H, S, D]), to tell what the layout alone does to L2 traffic and work per joule. --host NAME adds
"cubridge-NAME": the shipped kernel launched as ab_variants.py's host variant NAME (another grid or kv tile).

On the H200 every attention kernel here runs at the 700 W power cap, so the clock, not the power, moves: TFLOPS
per watt and TFLOPS then rank providers alike, and the clock shows whether a lead is work per cycle (same clock) or
power (higher clock). Samples of the first `--settle` seconds of each run (the clock ramping down to the cap) are
left out. The reference kernel's output is compared with each other provider's before timing."""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ab_variants import (  # noqa: E402
    HOST_VARIANTS, HostVariant, cudnn_launchers, fa4_launchers, use_host_variant)
from cubridge.runtime.compiler import compile_cubin  # noqa: E402
from cubridge.runtime.reference import causal_density  # noqa: E402

sm90_host = importlib.import_module("cubridge.runtime.attention_sm90")  # the module: the package exports the function

SAMPLE_MS = 100
SAMPLER_LEAD_S = 0.3  # the sampler runs this long before the first launch
LAUNCHES_PER_SYNC = 8  # launches between the host's clock checks
QUERY = "timestamp,power.draw,clocks.sm"


def providers(args, q, k, v) -> dict[str, callable]:
    """name -> run(causal) for each provider asked for, FA4 on its own layout of the same inputs."""
    inputs = (q, k, v)
    runs = kernel_providers(args.extra, q, k, v, tuple(args.host))
    if args.bshd:
        bshd = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in inputs)
        shipped = runs["cubridge"]
        runs["cubridge-bshd"] = lambda causal: shipped(causal, bshd)
    if args.fa4:
        fa4 = fa4_launchers([inputs])
        runs["fa4"] = lambda causal: fa4[causal](inputs)
    if args.cudnn:
        cudnn = cudnn_launchers()
        runs["cudnn"] = lambda causal: cudnn[causal](inputs)
    return runs


def kernel_providers(extra: list[str], q, k, v, hosts: tuple[str, ...] = ()) -> dict[str, callable]:
    """name -> run(causal[, inputs]) for the shipped kernel ("cubridge"), each --extra NAME=FILE source and each
    --host variant ("cubridge-NAME": the shipped kernel launched as ab_variants.py's host variant NAME), all
    launched through the runtime (on q, k, v unless given other inputs). The cubin, the host constants and the grid
    (and with them the launch plans) are swapped when the provider changes, never within a run."""
    shipped = sm90_host._compiled
    kernels = {"cubridge": (shipped, HostVariant())}
    for item in extra:
        name, _, file = item.partition("=")
        if not name or name in kernels or not Path(file).is_file():
            raise SystemExit(f"sustained_power: --extra {item!r}: expected a new NAME=FILE with an existing file")
        compiled = compile_cubin(Path(file), torch.cuda.get_device_capability())
        kernels[name] = (lambda capability, compiled=compiled: compiled, HostVariant())
    for name in hosts:
        if name not in HOST_VARIANTS["sm90"]:
            raise SystemExit(f"sustained_power: --host {name!r}: one of {', '.join(HOST_VARIANTS['sm90'])}")
        kernels[f"cubridge-{name}"] = (shipped, HOST_VARIANTS["sm90"][name])
    defaults = {constant: getattr(sm90_host, constant)
                for _, variant in kernels.values() for constant, _ in variant.constants}
    sm_count = sm90_host._sm_count
    current = [("cubridge", None)]

    def runner(name, kernel, variant):
        def run(causal, inputs=(q, k, v)):
            if current[0] != (name, causal):
                current[0] = (name, causal)
                sm90_host._compiled = kernel
                batch, heads, seqlen, _ = inputs[0].shape
                tiles = math.ceil(seqlen / sm90_host.BLOCK_M) * heads * batch
                use_host_variant(sm90_host, variant, causal, tiles, defaults, sm_count)
                sm90_host._PLANS.clear()  # a launch plan holds the function, kv tile and grid it was made with
            return sm90_host.attention_sm90(*inputs, causal=causal)
        return run
    return {name: runner(name, kernel, variant) for name, (kernel, variant) in kernels.items()}


def sustained(run, seconds: float, settle: float) -> dict[str, float]:
    """Launches `run` back to back for `seconds` under nvidia-smi's sampling: calls per second, mean power (W) and
    SM clock (MHz) over the samples after `settle` seconds."""
    sampler = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                f"-lms={SAMPLE_MS}"], stdout=subprocess.PIPE, text=True)
    time.sleep(SAMPLER_LEAD_S)  # the sampler's first readings
    torch.cuda.synchronize()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < seconds:
        for _ in range(LAUNCHES_PER_SYNC):
            run()
        calls += LAUNCHES_PER_SYNC
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    sampler.terminate()
    watts, mhz, samples = run_samples(sampler.communicate()[0], SAMPLER_LEAD_S + settle, SAMPLER_LEAD_S + elapsed)
    return {"calls_per_s": calls / elapsed, "watts": watts, "mhz": mhz, "samples": samples}


def run_samples(csv: str, start_s: float, end_s: float) -> tuple[float, float, int]:
    """(mean power, mean SM clock, sample count) of nvidia-smi's `QUERY` lines taken from `start_s` to `end_s`
    after the sampler started (one every SAMPLE_MS, by position: its timestamps have a one-second resolution).
    SystemExit where none falls inside."""
    readings = [line.split(", ") for line in csv.strip().splitlines()]
    samples = readings[round(start_s * 1000 / SAMPLE_MS):round(end_s * 1000 / SAMPLE_MS)]
    if not samples:
        raise SystemExit("sustained_power: no power samples inside the run (a longer --seconds)")
    return (statistics.mean(float(s[1]) for s in samples), statistics.mean(float(s[2]) for s in samples),
            len(samples))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=None)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fa4", action="store_true", help="FlashAttention-4's flash_attn_func beside ours")
    parser.add_argument("--cudnn", action="store_true", help="SDPA's cuDNN backend beside ours")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE",
                        help="a provider running attention_sm90.cu's edited copy FILE (repeatable)")
    parser.add_argument("--bshd", action="store_true", help="the shipped kernel on [B, S, H, D] memory beside")
    parser.add_argument("--host", action="append", default=[], metavar="NAME",
                        help="the shipped kernel launched as ab_variants.py's host variant NAME (repeatable)")
    args = parser.parse_args()
    if args.settle >= args.seconds:
        raise SystemExit("sustained_power: --settle must be shorter than --seconds")

    torch.manual_seed(0)
    heads_kv = args.heads_kv or args.heads
    shape_q = (args.batch, args.heads, args.seqlen, args.head_dim)
    shape_kv = (args.batch, heads_kv, args.seqlen, args.head_dim)
    q = torch.randn(shape_q, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(shape_kv, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    runs = providers(args, q, k, v)
    for causal in (False, True):
        expected = runs["cubridge"](causal).float()
        for name, run in runs.items():
            error = (run(causal).float() - expected).abs().max().item()
            print(f"{name} {'causal' if causal else 'full'}: max |out - cubridge's| = {error:.2e}")
    full_flops = 4 * args.batch * args.heads * args.seqlen * args.seqlen * args.head_dim
    cells = [(name, causal) for causal in (False, True) for name in runs]
    results = {cell: [] for cell in cells}
    for round_index in range(args.rounds):
        for name, causal in cells[round_index % len(cells):] + cells[:round_index % len(cells)]:
            run = runs[name]
            measured = sustained(lambda: run(causal), args.seconds, args.settle)
            flops = full_flops * (causal_density(args.seqlen, args.seqlen) if causal else 1.0)
            measured["tflops"] = flops * measured["calls_per_s"] / 1e12
            results[name, causal].append(measured)
            print(f"round {round_index} {name} {'causal' if causal else 'full'}: {measured['tflops']:.1f} TFLOPS, "
                  f"{measured['watts']:.0f} W, {measured['mhz']:.0f} MHz ({measured['samples']} samples)", flush=True)
    print(f"\nB={args.batch} HQ={args.heads} HKV={heads_kv} S={args.seqlen} D={args.head_dim} bf16, "
          f"{args.seconds:g} s runs, {args.rounds} rounds (means)")
    print("| provider | mask | TFLOPS | W | TFLOPS/W | SM MHz |")
    print("|---|---|---|---|---|---|")
    for name, causal in cells:
        rows = results[name, causal]
        tflops = statistics.mean(r["tflops"] for r in rows)
        watts = statistics.mean(r["watts"] for r in rows)
        mhz = statistics.mean(r["mhz"] for r in rows)
        print(f"| {name} | {'causal' if causal else 'full'} | {tflops:.1f} | {watts:.0f} | {tflops / watts:.3f} | "
              f"{mhz:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
