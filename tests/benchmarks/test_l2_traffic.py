"""benchmarks/l2_traffic.py: the unmerged sector count, the parse of ncu's CSV, and the providers it refuses."""

import sys

import pytest

from benchmarks.l2_traffic import METRICS, main, parse_ncu_csv, unmerged_sectors

HEADER = '"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'


def test_unmerged_sectors_count_each_tiles_q_output_and_the_keys_its_mask_visits():
    # B2 H32 S8k D128 bf16: 4096 tiles, each 32 KiB of Q, 32 KiB of output and 4 MiB of K and V
    assert unmerged_sectors(2, 32, 8192, 128, causal=False) == 4096 * (64 * 1024 + 4 * 1024 * 1024) / 32
    # causal: q tile i visits keys [0, 128 (i + 1)), 65 / 128 of them on average over 64 tiles
    assert unmerged_sectors(2, 32, 8192, 128, causal=True) == 4096 * (64 + 4096 * 65 / 128) * 1024 / 32


def test_the_one_kernels_metrics_are_read_with_their_units_past_the_programs_own_output():
    text = ("a line the profiled program printed\n" + HEADER +
            '"0","7","attention","Command line profiler metrics","lts__t_sectors_srcnode_gpc.sum","sector",'
            '"410,668,516"\n'
            '"0","7","attention","Command line profiler metrics","gpu__time_duration.sum","nsecond","2940000"\n'
            '"0","7","attention","Command line profiler metrics","some__other.sum","byte","1"\n')
    assert parse_ncu_csv(text, METRICS) == {"lts__t_sectors_srcnode_gpc.sum": (410668516.0, "sector"),
                                            "gpu__time_duration.sum": (2940000.0, "nsecond")}
    # a metric asked for with --metric is read as well
    assert parse_ncu_csv(text, METRICS | {"some__other.sum": "some__other.sum"})["some__other.sum"] == (1.0, "byte")


@pytest.mark.parametrize("rows, message", [("", "one profiled kernel, ncu reported 0"),
                                           ("x", "one profiled kernel, ncu reported 2")])
def test_no_kernel_or_two_are_refused(rows, message):
    row = '"{}","7","k","s","gpu__time_duration.sum","nsecond","1"\n'
    text = HEADER + ("".join(row.format(i) for i in range(2)) if rows else "")
    with pytest.raises(SystemExit, match=message):
        parse_ncu_csv(text, METRICS)


def test_output_without_a_table_is_refused():
    with pytest.raises(SystemExit, match="ncu printed no metrics"):
        parse_ncu_csv("==PROF== Disconnected\n", METRICS)


def test_an_unknown_provider_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["l2_traffic.py", "--providers", "cubridge,flash3"])
    with pytest.raises(SystemExit, match="no provider named flash3"):
        main()


def test_an_extra_source_is_a_provider_and_a_malformed_one_is_refused(monkeypatch, tmp_path):
    source = tmp_path / "edited.cu"
    source.write_text("// an edited kernel")
    monkeypatch.setattr(sys, "argv", ["l2_traffic.py", "--extra", f"edited={source}", "--providers", "cubridge,other"])
    with pytest.raises(SystemExit, match="no provider named other"):  # edited is known, other is not
        main()
    for item in ("edited", f"fa4={source}", f"edited={tmp_path / 'missing.cu'}"):
        monkeypatch.setattr(sys, "argv", ["l2_traffic.py", "--extra", item])
        with pytest.raises(SystemExit, match="expected a new NAME=FILE"):
            main()
