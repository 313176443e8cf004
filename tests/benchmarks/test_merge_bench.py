"""benchmarks/merge_bench.py: several `cubridge bench` runs merged into one table, plot and summary."""

import json

import pytest

from benchmarks import merge_bench
from cubridge.tools import bench


def record(spec_name, seqlen, providers):
    return {"spec": spec_name, "config": "llama2-7b", "batch": 16384 // seqlen, "heads_q": 32, "heads_kv": 32,
            "seqlen": seqlen, "head_dim": 128, "density": 1.0, "build_s": 0.2, "providers": providers}


def test_runs_merge_into_one_table_plot_and_summary(tmp_path):
    softcap = record("softcap", 4096, {
        "cubridge": {"ms": 1.0, "tflops": 530.0, "max_error": 1e-3},
        "flex": {"ms": 3.9, "tflops": 137.0, "max_error": 1e-3, "cubridge_speedup": 3.87},
        "flex-flash": {"ms": 1.5, "tflops": 363.0, "max_error": 1e-3, "cubridge_speedup": 1.46}})
    sigmoid = record("sigmoid", 4096, {
        "cubridge": {"ms": 1.0, "tflops": 696.0, "max_error": 1e-3},
        "flex": {"note": "FlexAttention has no sigmoid normalization"},
        "eager": {"ms": 41.5, "tflops": 16.7, "max_error": 1e-3, "cubridge_speedup": 41.53}})
    bench.write_results([softcap], ["cubridge", "flex", "flex-flash"], tmp_path / "a")
    bench.write_results([sigmoid], ["cubridge", "flex", "eager"], tmp_path / "b")
    records = merge_bench.load_records([tmp_path / "a", tmp_path / "b"])
    assert [r["spec"] for r in records] == ["softcap", "sigmoid"]
    table = merge_bench.summary(records, ["cubridge", "flex", "flex-flash", "eager"])
    assert "| spec | config | S | density | cubridge TFLOPS | x flex | x flex-flash | x eager |" in table
    assert "| softcap | llama2-7b | 4096 | 1.000 | 530.0 | 3.87 | 1.46 | - |" in table
    assert "| sigmoid | llama2-7b | 4096 | 1.000 | 696.0 | - | - | 41.53 |" in table


def test_the_command_writes_every_file(tmp_path, monkeypatch):
    run = record("softcap", 4096, {"cubridge": {"ms": 1.0, "tflops": 530.0, "max_error": 1e-3}})
    bench.write_results([run], ["cubridge"], tmp_path / "a")
    monkeypatch.setattr("sys.argv", ["merge_bench.py", str(tmp_path / "a"), "-o", str(tmp_path / "out")])
    assert merge_bench.main() == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "results.json", "results.md", "results.png", "summary.md"]
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == [run]


def test_a_directory_without_results_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        merge_bench.load_records([tmp_path])


def test_a_case_measured_again_replaces_the_earlier_record_in_place(tmp_path):
    first = [record("softcap", 4096, {"cubridge": {"ms": 1.0, "tflops": 500.0, "max_error": 1e-3}}),
             record("alibi", 4096, {"cubridge": {"ms": 1.0, "tflops": 520.0, "max_error": 1e-3}})]
    again = [record("softcap", 4096, {"cubridge": {"ms": 0.9, "tflops": 560.0, "max_error": 1e-3}}),
             record("softcap", 16384, {"cubridge": {"ms": 9.0, "tflops": 545.0, "max_error": 1e-3}})]
    bench.write_results(first, ["cubridge"], tmp_path / "old")
    bench.write_results(again, ["cubridge"], tmp_path / "new")
    records = merge_bench.load_records([tmp_path / "old", tmp_path / "new"])
    assert [(r["spec"], r["seqlen"], r["providers"]["cubridge"]["tflops"]) for r in records] == [
        ("softcap", 4096, 560.0), ("alibi", 4096, 520.0), ("softcap", 16384, 545.0)]
