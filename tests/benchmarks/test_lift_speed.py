"""benchmarks/lift_speed.py runs and reports the stages and the whole lift + transfer + lower against the 3 s target."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lift_speed_reports(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("lift_speed", ROOT / "benchmarks" / "lift_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["lift_speed.py", "--runs", "1"])
    module.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("lift of attention_sm90.cu (default entry): median ")
    assert lines[1].startswith("transfer (causal.py) + lower of attention_sm90.mlir: median ")
    assert lines[2].startswith("lift + transfer (causal.py) + lower of attention_sm90.cu: median ")
    assert lines[3].startswith("lift + transfer + lower ") and lines[3].endswith(" the 3 s target")
