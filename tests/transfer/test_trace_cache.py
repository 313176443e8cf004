"""A spec's traced hooks are cached on disk by everything they depend on: a second load does not trace, an
edit of the spec (or of a module it imports from the project) traces again."""

from __future__ import annotations

import shutil

import pytest

import cubridge.frontends.spec as spec_module
from cubridge.frontends.spec import load_spec

SPEC = """
import torch
from helpers import CAP

def score_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)
"""


@pytest.fixture
def traces(monkeypatch, tmp_path):
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []
    real = spec_module.trace_hook

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(spec_module, "trace_hook", counting)
    return calls


def _write(tmp_path, cap: float) -> str:
    (tmp_path / "helpers.py").write_text(f"CAP = {cap}\n")
    path = tmp_path / "softcap_spec.py"
    path.write_text(SPEC)
    return str(path)


def test_a_second_load_reuses_the_traces(traces, tmp_path):
    path = _write(tmp_path, 2.0)
    first = load_spec(path)
    second = load_spec(path)
    assert len(traces) == 1
    assert second.score_expr == first.score_expr
    assert second.score_expr.line == first.score_expr.line


def test_a_load_again_in_the_process_needs_neither_a_trace_nor_the_disk_cache(traces, tmp_path):
    """A cached build's load (issue 14: the callable within 1 ms) keeps the traces in memory too."""
    path = _write(tmp_path, 2.0)
    first = load_spec(path)
    shutil.rmtree(tmp_path / "cache")
    again = load_spec(path)
    assert len(traces) == 1 and again.score_expr is first.score_expr


def test_an_edited_import_traces_again(traces, tmp_path, monkeypatch):
    path = _write(tmp_path, 2.0)
    load_spec(path)
    _write(tmp_path, 3.0)
    monkeypatch.delitem(__import__("sys").modules, "helpers")
    edited = load_spec(path)
    assert len(traces) == 2
    assert 3.0 in {node.args[0] for node in _nodes(edited.score_expr) if node.op == "const"}


def test_a_value_the_spec_computes_when_it_runs_is_part_of_the_key(traces, tmp_path, monkeypatch):
    """The same spec text can compute other values (a configuration read when it runs): what its hooks read is
    part of the key, a dict's items included."""
    path = tmp_path / "window_spec.py"
    path.write_text("import os\n"
                    "CONFIG = {'window': int(os.environ['SPEC_WINDOW'])}\n\n"
                    "def mask_mod(b, h, q_idx, kv_idx):\n"
                    "    return (q_idx - kv_idx).abs() <= CONFIG['window']\n")
    windows = []
    for window in ("2", "5"):
        monkeypatch.setenv("SPEC_WINDOW", window)
        windows.append({node.args[0] for node in _nodes(load_spec(str(path)).mask_expr) if node.op == "const"})
    assert len(traces) == 2 and 2 in windows[0] and 5 in windows[1]


def _nodes(expr):
    yield expr
    for arg in expr.args:
        if hasattr(arg, "op"):
            yield from _nodes(arg)
