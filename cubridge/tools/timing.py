"""Paired GPU timing. Every round launches each candidate once, in an order rotated from round to round, each
launch after an L2 flush and between its own pair of CUDA events. Clock and power drift under the GPU's power
cap then reach all candidates alike, and the per-round time ratio of two candidates resolves differences far
smaller than timing each candidate in its own stretch does (an A/A pair of the same kernel: median ratio
within 0.1%, quartiles within 0.3%; docs/performance.md, run 47)."""

from __future__ import annotations

from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 2**20  # as triton.testing.do_bench: larger than the H100 / H200 L2 (50 MB)


def time_paired(launchers: dict[str, Callable[[], object]], rounds: int,
                warmup_rounds: int) -> dict[str, list[float]]:
    """Milliseconds of each candidate's launch in every timed round (lists aligned by round). Returns after
    the last launch completed."""
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    names = list(launchers)
    events = []
    for round_index in range(warmup_rounds + rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launchers[name]()
            end.record()
            if round_index >= warmup_rounds:
                events.append((name, start, end))
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in names}
    for name, start, end in events:
        times[name].append(start.elapsed_time(end))
    return times


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), nearest rank."""
    ordered = sorted(values)
    return tuple(ordered[round(fraction * (len(ordered) - 1))] for fraction in (0.25, 0.5, 0.75))


def speedup(times: dict[str, list[float]], baseline: str, name: str) -> tuple[float, float, float]:
    """Quartiles of the per-round ratio baseline time / `name` time (> 1: `name` is faster)."""
    return quartiles([b / t for b, t in zip(times[baseline], times[name])])
