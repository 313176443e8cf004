"""Tool speed of lift + transfer + lower: on one CPU core, the median wall time of lifting the Hopper reference (its
default entry point), of transfer + lower of the checked-in IR for a spec, and of the whole
`cuir-opt --lift --transfer=SPEC --lower` pipeline on the lifted kernel (lift, transfer, lower in one process),
which the 3 s target is about. Imports (torch, xDSL) are loaded once, before timing.

    taskset -c 0 python3 benchmarks/lift_speed.py [--runs N] [--spec SPEC.py]
"""

from __future__ import annotations

import os

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from cubridge.dialect import cuir_context  # noqa: E402
from cubridge.diagnostics import parse_module  # noqa: E402
from cubridge.frontends.cuda import lift_cuda_file  # noqa: E402
from cubridge.lowering import cloned_pairs, lower_module  # noqa: E402
from cubridge.passes.transfer import TransferPass  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu"
REFERENCE_IR = ROOT / "examples" / "ir" / "attention_sm90.mlir"
TARGET_SECONDS = 3.0


def _median(action, runs: int) -> tuple[float, float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def _transfer_and_lower(spec: Path) -> None:
    context = cuir_context()
    reference = parse_module(context, REFERENCE_IR.read_text(), str(REFERENCE_IR))
    variant = reference.clone()
    TransferPass(spec=str(spec)).apply(context, variant)
    lower_module(reference, variant, spec.stem)


def _lift_transfer_and_lower(spec: Path) -> None:
    """What `cuir-opt --lift --transfer=SPEC --lower` does after parsing its arguments."""
    module = lift_cuda_file(KERNEL).module
    reference = module.clone()
    pairs = cloned_pairs(module, reference)
    TransferPass(spec=str(spec)).apply(cuir_context(), module)
    lower_module(reference, module, spec.stem, pairs=pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "specs" / "causal.py")
    args = parser.parse_args()
    _transfer_and_lower(args.spec)  # warm: the spec's traced hooks are cached on disk, as in normal use
    lift = _median(lambda: lift_cuda_file(KERNEL), args.runs)
    rest = _median(lambda: _transfer_and_lower(args.spec), args.runs)
    print(f"lift of {KERNEL.name} (default entry): median {lift[0]:.2f} s (min {lift[1]:.2f}, max {lift[2]:.2f})")
    print(f"transfer ({args.spec.name}) + lower of {REFERENCE_IR.name}: median {rest[0]:.2f} s "
          f"(min {rest[1]:.2f}, max {rest[2]:.2f})")
    whole = _median(lambda: _lift_transfer_and_lower(args.spec), args.runs)
    print(f"lift + transfer ({args.spec.name}) + lower of {KERNEL.name}: median {whole[0]:.2f} s "
          f"(min {whole[1]:.2f}, max {whole[2]:.2f})")
    verdict = "within" if whole[0] <= TARGET_SECONDS else "over"
    print(f"lift + transfer + lower {whole[0]:.2f} s: {verdict} the {TARGET_SECONDS:.0f} s target")


if __name__ == "__main__":
    main()
