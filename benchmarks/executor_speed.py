"""Executor speed: run the Hopper example (B=1, HQ=HKV=2, S=512, D=128, every
program, the round-robin schedule) on one CPU core and print the median wall
time of compiling and executing it. The target is at most 5 seconds.

    python benchmarks/executor_speed.py [--runs N] [--example PATH]
"""

from __future__ import annotations

import os

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from cubridge.interpreter.executor import KernelPlan, ProblemShape, execute, find_kernel  # noqa: E402
from cubridge.interpreter.verify import random_inputs  # noqa: E402
from cubridge.dialect import cuir_context  # noqa: E402
from cubridge.diagnostics import parse_module  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ir" / "attention_sm90.mlir"
SHAPE = ProblemShape(batch=1, heads_q=2, heads_kv=2, seqlen_q=512, seqlen_kv=512, head_dim=128)
TARGET_SECONDS = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--example", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    module = parse_module(cuir_context(), args.example.read_text(), str(args.example))
    kernel = find_kernel(module)
    inputs = random_inputs(KernelPlan(kernel), SHAPE, seed=0)
    scale = 1.0 / math.sqrt(SHAPE.head_dim)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        execution = execute(KernelPlan(kernel), SHAPE, inputs, scale)
        times.append(time.perf_counter() - start)
        if execution.log:
            raise SystemExit(f"the example did not run cleanly: {execution.log.diagnostics[0]}")
    median = statistics.median(times)
    verdict = "meets" if median <= TARGET_SECONDS else "MISSES"
    print(
        f"{args.example.name} {SHAPE}, all programs, round-robin, 1 core: "
        f"median {median:.3f} s over {args.runs} runs ({verdict} the {TARGET_SECONDS:.0f} s target)"
    )


if __name__ == "__main__":
    main()
