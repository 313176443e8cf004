"""L2 traffic of one launch per provider, counted by Nsight Compute (GPU-only; needs `ncu`): how many of the sectors
the kernel's TMA loads ask for reach the L2, against the count if no request were merged on the way.

  python3 benchmarks/l2_traffic.py [--seqlen 8192] [--batch 2] [--heads 32 --heads-kv 32] [--causal]
                                   [--providers cubridge,grid-per-tile,fa4]
                                   [--extra NAME=FILE.cu ...] [--metric NCU_METRIC ...]

Each provider runs in its own process under `ncu --profile-from-start off --clock-control none` (this script with
`--launch PROVIDER`): three warm-up launches, then one between cudaProfilerStart and Stop. Providers: `cubridge`
(the shipped kernel), `bshd` (it on [B, S, H, D] memory, FA4's layout), a host variant of ab_variants.py
(`grid-per-tile`: one CTA per work tile, FA4's non-persistent grid; `unpaired`; `kv-tile-128`; `grid-balanced`),
`fa4`, and each `--extra NAME=FILE` (an edited copy of attention_sm90.cu launched through the same host code, as in
ab_variants.py).

Run 218 found FA4's requests reaching the L2 for 0.40 of the unmerged sectors and ours for 0.75, with the same
128-row query tiles: requests for the same sectors from several SMs at about the same time are merged before the L2
counts them, and this tells which schedule keeps them together. The unmerged count is what the query tiles' TMA
loads ask for: each tile's Q once and the K and V rows its mask visits (all of them, or the causal share), plus the
output's stores.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import math
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ab_variants import HOST_VARIANTS, fa4_launchers, use_host_variant  # noqa: E402

SECTOR_BYTES = 32
WARMUP_LAUNCHES = 3
METRICS = {  # ncu metric -> the table's column
    "gpu__time_duration.sum": "duration",
    "sm__inst_executed.sum": "instructions",
    "lts__t_sectors_srcnode_gpc.sum": "L2 sectors from the SMs",
    "lts__t_requests_srcnode_gpc.sum": "L2 requests from the SMs",
    "lts__t_sector_hit_rate.pct": "L2 hit rate",
    "lts__t_sectors_srcunit_ltcfabric.sum": "sectors from the other L2 partition",
    "dram__bytes_read.sum": "DRAM read",
}
DEFAULT_PROVIDERS = "cubridge,grid-per-tile,fa4"


def providers(extra: dict[str, Path]) -> list[str]:
    return ["cubridge", "bshd", *HOST_VARIANTS["sm90"], "fa4", *extra]


def extra_sources(items: list[str]) -> dict[str, Path]:
    """NAME -> FILE of each --extra NAME=FILE; SystemExit for a malformed item, a missing file or a taken name."""
    sources = {}
    for item in items:
        name, _, file = item.partition("=")
        if not name or not Path(file).is_file() or name in providers(sources):
            raise SystemExit(f"l2_traffic: --extra {item!r}: expected a new NAME=FILE with an existing file")
        sources[name] = Path(file)
    return sources


def unmerged_sectors(batch: int, heads: int, seqlen: int, head_dim: int, causal: bool, element_bytes: int = 2,
                     block_m: int = 128) -> float:
    """Sectors the query tiles' loads and stores ask for when no request is merged: per tile its Q rows and the
    output once, and K and V over the keys its mask visits (causal: up to the tile's last row)."""
    q_tiles = math.ceil(seqlen / block_m)
    row_bytes = head_dim * element_bytes
    keys = sum(min(seqlen, (tile + 1) * block_m) if causal else seqlen for tile in range(q_tiles))
    per_head = q_tiles * 2 * block_m * row_bytes + 2 * keys * row_bytes
    return batch * heads * per_head / SECTOR_BYTES


def parse_ncu_csv(text: str, metrics: dict[str, str]) -> dict[str, tuple[float, str]]:
    """metric -> (value, unit) of `metrics` from `ncu --csv` output: the rows of the one profiled kernel (lines
    before the table are the program's own and skipped). SystemExit when no kernel or more than one was profiled."""
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit("l2_traffic: ncu printed no metrics (is the profiler allowed here?):\n" + text[-2000:])
    rows = [row for row in csv.DictReader(io.StringIO(text[start:])) if row.get("Metric Name") in metrics]
    kernels = {row["ID"] for row in rows}
    if len(kernels) != 1:
        raise SystemExit(f"l2_traffic: expected one profiled kernel, ncu reported {len(kernels)}")
    return {row["Metric Name"]: (float(row["Metric Value"].replace(",", "")), row["Metric Unit"]) for row in rows}


def launch(provider: str, args, extra: dict[str, Path]) -> None:
    """The child: warm-up launches, then one launch between cudaProfilerStart and Stop."""
    import torch

    from cubridge.runtime.compiler import compile_cubin

    host = importlib.import_module("cubridge.runtime.attention_sm90")
    heads_kv = args.heads_kv or args.heads
    torch.manual_seed(0)
    q = torch.randn(args.batch, args.heads, args.seqlen, args.head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(args.batch, heads_kv, args.seqlen, args.head_dim, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    inputs = (q, k, v)
    if provider == "fa4":
        fa4 = fa4_launchers([inputs])[args.causal]
        run = lambda: fa4(inputs)  # noqa: E731
    else:
        if provider == "bshd":
            inputs = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in inputs)
        if provider in extra:
            host._compiled = lambda capability: compile_cubin(extra[provider].resolve(), capability)
        if provider in HOST_VARIANTS["sm90"]:
            tiles = math.ceil(args.seqlen / host.BLOCK_M) * args.heads * args.batch
            use_host_variant(host, HOST_VARIANTS["sm90"][provider], args.causal, tiles, {}, host._sm_count)
        run = lambda: host.attention_sm90(*inputs, causal=args.causal)  # noqa: E731
    for _ in range(WARMUP_LAUNCHES):
        run()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def profile(provider: str, args, metrics: dict[str, str]) -> dict[str, tuple[float, str]]:
    shape = ["--seqlen", str(args.seqlen), "--batch", str(args.batch), "--heads", str(args.heads),
             "--head-dim", str(args.head_dim)] + (["--heads-kv", str(args.heads_kv)] if args.heads_kv else [])
    shape += [option for item in args.extra for option in ("--extra", item)]
    command = ["ncu", "--profile-from-start", "off", "--clock-control", "none", "--csv", "--print-units", "base",
               "--metrics", ",".join(metrics), sys.executable, __file__, "--launch", provider, *shape,
               *(["--causal"] if args.causal else [])]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"l2_traffic: ncu on {provider} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return parse_ncu_csv(result.stdout, metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=None)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--providers", default=DEFAULT_PROVIDERS)
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=FILE",
                        help="a provider running attention_sm90.cu's edited copy FILE (repeatable; add NAME to "
                             "--providers)")
    parser.add_argument("--metric", action="append", default=[], metavar="NCU_METRIC",
                        help="one more ncu metric, a column of its own (repeatable; `ncu --query-metrics` lists them)")
    parser.add_argument("--launch", default=None, help=argparse.SUPPRESS)  # the child under ncu
    args = parser.parse_args()
    metrics = METRICS | {metric: metric for metric in args.metric}
    extra = extra_sources(args.extra)
    chosen = [args.launch] if args.launch else args.providers.split(",")
    unknown = sorted(set(chosen) - set(providers(extra)))
    if unknown:
        raise SystemExit(f"l2_traffic: no provider named {', '.join(unknown)} (one of {', '.join(providers(extra))})")
    if args.launch:
        launch(args.launch, args, extra)
        return 0
    unmerged = unmerged_sectors(args.batch, args.heads, args.seqlen, args.head_dim, args.causal)
    print(f"B={args.batch} HQ={args.heads} HKV={args.heads_kv or args.heads} S={args.seqlen} D={args.head_dim} bf16 "
          f"{'causal' if args.causal else 'full'}; unmerged: {unmerged / 1e6:.1f} M sectors")
    print("| provider | " + " | ".join(metrics.values()) + " | reaching the L2 |")
    print("|---" * (len(metrics) + 2) + "|")
    for provider in chosen:
        values = profile(provider, args, metrics)
        cells = [f"{values[m][0]:,.6g} {values[m][1]}" if m in values else "-" for m in metrics]
        share = values.get("lts__t_sectors_srcnode_gpc.sum", (math.nan, ""))[0] / unmerged
        print(f"| {provider} | " + " | ".join(cells) + f" | {share:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
