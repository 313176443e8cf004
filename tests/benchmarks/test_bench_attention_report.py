"""benchmarks/bench_attention.py's report: TFLOPS and paired speed-ups per provider."""

from benchmarks.bench_attention import write_markdown


def test_report_has_tflops_and_speedup_tables(tmp_path):
    results = [
        {"provider": "ours", "variant": "full", "label": "B1", "tflops": 600.04, "speedup_quartiles": [1, 1, 1]},
        {"provider": "theirs", "variant": "full", "label": "B1", "tflops": 590.0,
         "speedup_quartiles": [0.98, 0.983, 0.99]},
        {"provider": "broken", "variant": "full", "label": "B1", "passed": False, "skipped": "failed correctness"},
        {"provider": "eager", "variant": "full", "label": "B1", "skipped": "eager skipped: too large"},
    ]
    path = tmp_path / "results.md"
    write_markdown(results, ["ours", "theirs", "broken", "eager"], path, "# header")
    lines = path.read_text().splitlines()
    assert "| full | B1 | 600.0 | 590.0 | FAIL | skip |" in lines
    assert "| full | B1 | x1.000 [1.000, 1.000] | x0.983 [0.980, 0.990] |  |  |" in lines
    assert "- skip: eager full B1: eager skipped: too large" in lines
    assert not any("broken full B1" in line for line in lines)  # a failure is in the table, not the skip list
