"""spec_from_hooks: hooks given as callables traced like a spec file's, with the trace cache keyed by what the
hooks can compute with."""

import pytest
import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import spec as spec_module
from cubridge.frontends.spec import hooks_trace_key, spec_from_hooks

table = torch.arange(8)


def window(size):
    def within(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() < size
    return within


def lookup(b, h, q_idx, kv_idx):
    return table[q_idx] >= table[kv_idx]


def test_the_key_follows_values_code_and_captured_shapes():
    assert hooks_trace_key(None, window(3), {}) == hooks_trace_key(None, window(3), {})
    assert hooks_trace_key(None, window(3), {}) != hooks_trace_key(None, window(4), {})
    assert hooks_trace_key(None, window(3), {}) != hooks_trace_key(window(3), None, {})
    assert hooks_trace_key(None, lookup, {"table": table}) == hooks_trace_key(None, lookup, {"table": table + 1})
    assert hooks_trace_key(None, lookup, {"table": table}) != hooks_trace_key(None, lookup, {"table": table[:4]})


def test_a_second_load_reads_the_trace_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    traced = []
    trace_hook = spec_module.trace_hook
    monkeypatch.setattr(spec_module, "trace_hook", lambda *args: traced.append(args[0]) or trace_hook(*args))
    first = spec_from_hooks(mask_mod=lookup)
    second = spec_from_hooks(mask_mod=lookup)
    assert len(traced) == 1 and first.mask_expr == second.mask_expr
    assert first.name == "lookup" and list(first.captures) == ["table"] and first.path == __file__
    spec_from_hooks(mask_mod=window(5))
    assert len(traced) == 2


def test_bad_hooks_are_located_errors():
    with pytest.raises(CuBridgeError, match=r"test_spec_from_hooks.py:\d+: error: mask_mod must return a boolean"):
        spec_from_hooks(mask_mod=lambda b, h, q_idx, kv_idx: q_idx + kv_idx)
    with pytest.raises(CuBridgeError, match="a variant needs score_mod, mask_mod or both"):
        spec_from_hooks()
    with pytest.raises(CuBridgeError, match="score_mod must be a function score_mod"):
        spec_from_hooks(score_mod=3)
    with pytest.raises(CuBridgeError, match="normalization: expected one of softmax, sigmoid, relu"):
        spec_from_hooks(mask_mod=lookup, normalization="tanh")
