"""The Python examples run (here on the CPU, through the eager fallback), and swapping flex_attention's import
for cubridge.attention in examples/python/flex_swap.py leaves the model's validation loss unchanged."""

import re
import runpy
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"


def run(capsys, monkeypatch, name: str, *arguments: str) -> str:
    monkeypatch.setattr(sys, "argv", [name, *arguments])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_quickstart(capsys, monkeypatch):
    printed = run(capsys, monkeypatch, "quickstart.py")
    assert "out (2, 8, 1024, 128)" in printed and "lse (2, 8, 1024) torch.float32" in printed
    assert "second call with new boundaries" in printed


def test_swapping_the_import_keeps_the_validation_loss(capsys, monkeypatch):
    losses = {}
    for flag in ((), ("--flex",)):
        printed = run(capsys, monkeypatch, "flex_swap.py", "--seqlen", "128", *flag)
        losses[flag] = float(re.search(r"validation loss ([\d.]+)", printed)[1])
    assert losses[()] == pytest.approx(losses[("--flex",)], abs=1e-5)
