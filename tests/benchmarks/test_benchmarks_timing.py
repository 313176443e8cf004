"""cubridge/tools/timing.py: the paired timing the benchmarks report."""

import pytest
import torch

from cubridge.tools.timing import quartiles, speedup, time_paired


def test_quartiles_are_nearest_rank():
    assert quartiles([5.0, 1.0, 3.0, 2.0, 4.0]) == (2.0, 3.0, 4.0)
    assert quartiles([7.0]) == (7.0, 7.0, 7.0)


def test_speedup_pairs_rounds_not_sorted_times():
    # Each round the candidate takes 90% of the baseline's time, while both drift 2x over the run: the
    # per-round ratio sees 1/0.9 every time, which comparing medians of unpaired times would blur.
    times = {"base": [1.0, 1.5, 2.0], "fast": [0.9, 1.35, 1.8]}
    low, mid, high = speedup(times, "base", "fast")
    assert low == pytest.approx(1 / 0.9) and mid == pytest.approx(1 / 0.9) and high == pytest.approx(1 / 0.9)
    assert speedup(times, "base", "base") == (1.0, 1.0, 1.0)


@pytest.mark.gpu
def test_time_paired_times_every_candidate_every_round():
    a = torch.randn(2048, 2048, device="cuda")
    calls = {"one": 0, "two": 0}

    def launcher(name, repeats):
        def launch():
            calls[name] += 1
            for _ in range(repeats):
                a @ a
        return launch

    times = time_paired({"one": launcher("one", 1), "two": launcher("two", 4)}, rounds=6, warmup_rounds=2)
    assert calls == {"one": 8, "two": 8}
    assert [len(t) for t in times.values()] == [6, 6]
    assert all(t > 0 for series in times.values() for t in series)
    assert speedup(times, "two", "one")[1] > 2  # four products against one
