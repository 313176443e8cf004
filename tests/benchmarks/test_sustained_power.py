"""benchmarks/sustained_power.py's sample window: the readings of the timed run after its settle time."""

import pytest

from benchmarks.sustained_power import SAMPLE_MS, run_samples


def _csv(readings):
    return "\n".join(f"2026/12/03 18:00:00.000, {watts}, {mhz}" for watts, mhz in readings) + "\n"


def test_the_window_leaves_out_the_readings_before_the_settle_time_and_after_the_run():
    per_second = 1000 // SAMPLE_MS
    readings = [(100.0, 1980)] * per_second + [(690.0, 1620)] * per_second + [(80.0, 1980)] * per_second
    watts, mhz, count = run_samples(_csv(readings), 1.0, 2.0)
    assert (watts, mhz, count) == (690.0, 1620.0, per_second)


def test_a_run_shorter_than_one_sample_is_refused():
    with pytest.raises(SystemExit, match="no power samples"):
        run_samples(_csv([(690.0, 1620)] * 3), 1.0, 1.05)
