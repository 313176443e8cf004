"""The README's tour shows what cuir-run prints for the racy Hopper example today."""

from pathlib import Path

from cubridge.tools.cuir_run import main

ROOT = Path(__file__).resolve().parents[2]


def test_race_output_in_the_tour_is_current(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["examples/ir/attention_sm90_race.mlir"]) == 1
    printed = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text()
    assert f"$ cuir-run examples/ir/attention_sm90_race.mlir\n{printed}```" in readme
