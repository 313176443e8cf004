"""spec_from_hooks: hooks given as callables traced like a spec file's, with the trace cache keyed by what the
hooks can compute with."""

import functools
from types import SimpleNamespace

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


def shifted(offset, b, h, q_idx, kv_idx, scales=(1,), dtype=torch.int64):
    return (scales[0] * (q_idx - kv_idx + offset)).to(dtype).abs() < 4


def test_the_key_follows_a_partials_arguments_and_the_contents_of_containers_a_hook_reads():
    """A functools.partial's arguments and the items of a list or dict a hook reads are values the trace depends
    on: another value is another key (a stale trace would compile another mask)."""
    key = lambda hook: hooks_trace_key(None, hook, {})  # noqa: E731
    assert key(functools.partial(shifted, 1)) == key(functools.partial(shifted, 1))
    assert key(functools.partial(shifted, 1)) != key(functools.partial(shifted, 2))
    assert key(functools.partial(shifted, 1, scales=[1])) != key(functools.partial(shifted, 1, scales=[2]))
    assert key(functools.partial(shifted, 1, dtype=torch.int32)) != key(functools.partial(shifted, 1))
    scales = [1]
    def closing(b, h, q_idx, kv_idx):
        return (scales[0] * (q_idx - kv_idx)).abs() < 4
    before = key(closing)
    scales[0] = 2
    assert key(closing) != before
    lengths = {"window": 3}
    def by_name(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() < lengths["window"]
    before = key(by_name)
    lengths["window"] = 5
    assert key(by_name) != before


def test_the_key_follows_the_attributes_a_hook_reads_of_an_object_it_captures():
    """`config.window` or a module's `self.window` (a bound method's `self`): the attribute's value is part of the
    key, not the object's identity (a stale trace would compile the old window)."""
    config = SimpleNamespace(window=3, unread=1)

    def within(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() < config.window

    class Layer:
        def __init__(self, window):
            self.window = window

        def mask(self, b, h, q_idx, kv_idx):
            return (q_idx - kv_idx).abs() < self.window

    key = lambda hook: hooks_trace_key(None, hook, {})  # noqa: E731
    before = key(within)
    config.unread = 2
    assert key(within) == before
    config.window = 4
    assert key(within) != before
    layer = Layer(3)
    for hook in (functools.partial(Layer.mask, layer), layer.mask):  # a bound method is traced as that partial
        layer.window = 3
        before = key(hook)
        layer.window = 5
        assert key(hook) != before
    assert spec_from_hooks(mask_mod=Layer(2).mask).mask_expr != spec_from_hooks(mask_mod=Layer(6).mask).mask_expr


def test_a_partials_argument_is_traced_with_its_value(tmp_path, monkeypatch):
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    one, two = (spec_from_hooks(mask_mod=functools.partial(shifted, offset)) for offset in (1, 2))
    assert one.mask_expr != two.mask_expr


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
