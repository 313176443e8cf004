"""benchmarks/sustained_power.py: the sample window (the readings of the timed run after its settle time) and the
--extra kernel sources it refuses before compiling anything."""

import pytest

from benchmarks.sustained_power import SAMPLE_MS, kernel_providers, run_samples


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


@pytest.mark.parametrize("item", ["edited=/nonexistent/attention_sm90.cu", "=attention_sm90.cu", "cubridge={file}"])
def test_an_extra_source_that_is_missing_unnamed_or_named_like_the_shipped_kernel_is_refused(item, tmp_path):
    source = tmp_path / "attention_sm90.cu"
    source.write_text("// an edited copy\n")
    with pytest.raises(SystemExit, match="--extra"):
        kernel_providers([item.format(file=source)], None, None, None)
