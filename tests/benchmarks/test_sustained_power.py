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


def test_the_bshd_provider_runs_the_shipped_kernel_on_b_s_h_d_memory(monkeypatch):
    """--bshd: the same logical [B, H, S, D] inputs, laid out heads-inside-positions as FA4 takes them."""
    import argparse

    import torch

    import benchmarks.sustained_power as sustained_power

    seen = []
    monkeypatch.setattr(sustained_power.sm90_host, "attention_sm90",
                        lambda q, k, v, causal: seen.append((q, k, v, causal)) or q)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    args = argparse.Namespace(extra=[], host=[], bshd=True, fa4=False, cudnn=False)
    runs = sustained_power.providers(args, q, k, v)
    assert list(runs) == ["cubridge", "cubridge-bshd"]
    runs["cubridge-bshd"](True)
    runs["cubridge"](False)
    (bq, bk, bv, causal), (pq, _, _, plain_causal) = seen
    assert causal and not plain_causal and pq is q
    for laid_out, original in ((bq, q), (bk, k), (bv, v)):
        assert torch.equal(laid_out, original) and laid_out.stride() == (4 * 16 * 8, 8, 4 * 8, 1)


def test_host_variant_providers_launch_with_their_grid_and_constants_and_restore_the_defaults(monkeypatch):
    """--host NAME: the shipped kernel with ab_variants.py's host variant NAME for its own runs only (one CTA per
    tile on causal runs too; 128-key tiles on full runs only); switching back restores the host's defaults."""
    import torch

    import benchmarks.sustained_power as sustained_power

    host = sustained_power.sm90_host
    monkeypatch.setattr(host, "_sm_count", lambda index: 132)
    monkeypatch.setattr(host, "WIDE_MIN_SEQLEN_K", host.WIDE_MIN_SEQLEN_K)
    seen = []
    monkeypatch.setattr(host, "attention_sm90",
                        lambda q, k, v, causal: seen.append((host._sm_count(0), host.WIDE_MIN_SEQLEN_K)) or q)
    q, k, v = (torch.randn(2, 4, 300, 8) for _ in range(3))  # 3 tiles of 128 rows per (batch, head): 24 tiles
    runs = sustained_power.kernel_providers([], q, k, v, ("grid-per-tile", "kv-tile-128"))
    assert list(runs) == ["cubridge", "cubridge-grid-per-tile", "cubridge-kv-tile-128"]
    default = host.WIDE_MIN_SEQLEN_K
    for name, causal in [("cubridge", False), ("cubridge-grid-per-tile", False), ("cubridge-grid-per-tile", True),
                         ("cubridge-kv-tile-128", False), ("cubridge-kv-tile-128", True), ("cubridge", False)]:
        runs[name](causal)
    assert seen == [(132, default), (24, default), (24, default), (132, 2**31 - 1), (132, default), (132, default)]


def test_an_unknown_host_variant_is_refused():
    import benchmarks.sustained_power as sustained_power

    with pytest.raises(SystemExit, match="--host 'grid-huge'"):
        sustained_power.kernel_providers([], None, None, None, ("grid-huge",))
