"""Merge the results of several `cubridge bench` runs (one directory each, as a per-spec sweep writes them) into
one results.json / results.md / results.png, plus summary.md: one row per spec, config and length with
cubridge's TFLOPS and its speed-up against every other provider.

  python3 benchmarks/merge_bench.py RUN_DIR... -o OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cubridge.files import write_atomically  # noqa: E402
from cubridge.tools.bench import PROVIDERS, write_results  # noqa: E402


def load_records(directories: list[Path]) -> list[dict]:
    """Every record of every run, in the order given; a case (spec, config, length) measured again in a later
    directory replaces the earlier record in its place, so `merge_bench.py docs/bench NEW_RUN -o docs/bench`
    updates the published results. A directory without results.json is an error."""
    records: dict[tuple, dict] = {}
    for directory in directories:
        path = directory / "results.json"
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (not a cubridge bench output directory)")
        for record in json.loads(path.read_text()):
            records[(record["spec"], record["config"], record["seqlen"])] = record
    return list(records.values())


def summary(records: list[dict], providers: list[str]) -> str:
    """cubridge's TFLOPS and speed-up (median per-round time ratio) against each other provider; '-' where that
    provider did not run the case."""
    others = [name for name in providers if name not in ("cubridge", "cubridge-causal")]
    lines = ["| spec | config | S | density | cubridge TFLOPS | " + " | ".join(f"x {name}" for name in others) + " |",
             "|---|---|---|---|---|" + "---|" * len(others)]
    for record in records:
        results = record["providers"]
        if "tflops" not in results.get("cubridge", {}):
            continue
        ratios = [f"{results[name]['cubridge_speedup']:.2f}" if "cubridge_speedup" in results.get(name, {}) else "-"
                  for name in others]
        lines.append(f"| {record['spec']} | {record['config']} | {record['seqlen']} | {record['density']:.3f} | "
                     f"{results['cubridge']['tflops']:.1f} | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="cubridge bench output directories")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    records = load_records(args.runs)
    present = {name for record in records for name in record["providers"]}
    providers = [name for name in PROVIDERS if name in present]
    write_results(records, providers, args.output)
    write_atomically(args.output / "summary.md", summary(records, providers))
    print(f"merged {len(records)} cases from {len(args.runs)} runs into {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
