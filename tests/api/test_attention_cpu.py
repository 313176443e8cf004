"""cubridge.attention on the CPU: the eager fallback against flex_attention, the variant cache, torch.compile
(fullgraph) and the one-line argument errors."""

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

import cubridge
from cubridge import api
from cubridge.api import AttentionError
from cubridge.runtime.attention import layout_key

document = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)


def documents(b, h, q_idx, kv_idx):
    return document[q_idx] == document[kv_idx]


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def first_rows_masked(b, h, q_idx, kv_idx):
    return (q_idx >= 2) & (kv_idx <= q_idx)


def softcap(score, b, h, q_idx, kv_idx):
    return 2.0 * torch.tanh(score / 2.0)


def head_bias(score, b, h, q_idx, kv_idx):
    return score + 0.5 * h - 0.1 * (q_idx - kv_idx).abs()


def sliding(window):
    def within(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= window
    return within


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def inputs(heads_q=4, heads_kv=2, seqlen=16, head_dim=32, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, heads_q, seqlen, head_dim, generator=generator, dtype=dtype)
    k, v = (torch.randn(2, heads_kv, seqlen, head_dim, generator=generator, dtype=dtype) for _ in range(2))
    return q, k, v


def flex(q, k, v, score_mod=None, mask_mod=None, **options):
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2],
                                                                 device="cpu")
    return flex_attention(q, k, v, score_mod, block_mask, enable_gqa=q.shape[1] != k.shape[1], return_lse=True,
                          **options)


@pytest.mark.parametrize("score_mod", [None, softcap, head_bias])
@pytest.mark.parametrize("mask_mod", [None, documents, causal, first_rows_masked])
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)])
def test_fallback_matches_flex_attention(score_mod, mask_mod, heads):
    q, k, v = inputs(*heads)
    out, lse = cubridge.attention(q, k, v, score_mod, mask_mod=mask_mod, enable_gqa=heads[0] != heads[1],
                                  return_lse=True)
    expected_out, expected_lse = flex(q, k, v, score_mod, mask_mod)
    torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=1e-5)
    assert lse.dtype == torch.float32


def test_block_mask_and_scale_as_flex_attention_takes_them():
    q, k, v = inputs()
    block_mask = create_block_mask(first_rows_masked, None, None, 16, 16, device="cpu")
    out = cubridge.attention(q, k, v, softcap, block_mask, 0.3, True)
    expected = flex_attention(q, k, v, softcap, block_mask, 0.3, True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert out[:, :, :2].abs().max() == 0


def test_return_aux_and_kernel_options_as_flex_attention_takes_them():
    from torch.nn.attention.flex_attention import AuxRequest

    q, k, v = inputs()
    block_mask = create_block_mask(causal, None, None, 16, 16, device="cpu")
    out, aux = cubridge.attention(q, k, v, softcap, block_mask, None, True, False, {"BLOCK_M": 64},
                                  return_aux=AuxRequest(lse=True))
    expected_out, expected_aux = flex_attention(q, k, v, softcap, block_mask, enable_gqa=True,
                                                return_aux=AuxRequest(lse=True))
    torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(aux.lse, expected_aux.lse, atol=1e-5, rtol=1e-5)
    assert aux.max_scores is None
    with pytest.raises(AttentionError, match="return_aux: max_scores is not computed"):
        cubridge.attention(q, k, v, enable_gqa=True, return_aux=AuxRequest(lse=True, max_scores=True))


def test_bfloat16_inputs_give_bfloat16_output_and_float32_lse():
    q, k, v = inputs(dtype=torch.bfloat16)
    out, lse = cubridge.attention(q, k, v, softcap, enable_gqa=True, return_lse=True)
    expected_out, expected_lse = flex(q.float(), k.float(), v.float(), softcap)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    torch.testing.assert_close(out.float(), expected_out, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, expected_lse, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("normalization,activation", [("sigmoid", torch.sigmoid), ("relu", torch.relu)])
def test_other_normalizations_with_and_without_hooks(normalization, activation):
    q, k, v = inputs(2, 2, dtype=torch.float64)
    for mask_mod in (None, causal):
        out = cubridge.attention(q, k, v, mask_mod=mask_mod, normalization=normalization)
        scores = activation(q @ k.transpose(-1, -2) / math.sqrt(32))
        if mask_mod is not None:
            scores = scores.tril()
        torch.testing.assert_close(out, scores @ v)


def test_captured_values_are_arguments_and_the_variant_is_reused(monkeypatch):
    global document
    traced = []
    spec_from_hooks = api.spec_from_hooks
    monkeypatch.setattr(api, "spec_from_hooks", lambda *args: traced.append(args) or spec_from_hooks(*args))
    api._BINDINGS.clear()
    q, k, v = inputs()
    cubridge.attention(q, k, v, mask_mod=documents, enable_gqa=True)
    assert len(traced) == 1
    saved = document
    try:
        document = torch.tensor([0] * 8 + [1] * 8)  # new boundaries, same shape
        out = cubridge.attention(q, k, v, mask_mod=documents, enable_gqa=True)
        assert len(traced) == 1
        torch.testing.assert_close(out, flex(q, k, v, None, documents)[0], atol=1e-5, rtol=1e-5)
    finally:
        document = saved


def test_a_captured_tensor_rebound_to_another_shape_or_to_a_non_tensor_is_noticed():
    """The binding found by the hook objects holds while their captured tensors keep the traced dtype and shape:
    another shape is another variant, and a value that is no longer a tensor is traced again (a located error
    about the hook, not an AttributeError)."""
    global document
    q, k, v = inputs()
    saved = document
    try:
        first = api._binding(None, documents, "softmax")[0].key
        document = torch.tensor([0] * 10 + [1] * 10)
        longer, captures = api._binding(None, documents, "softmax")
        assert longer.key != first and captures == [document]
        document = document.int()
        assert api._binding(None, documents, "softmax")[0].key not in (first, longer.key)
        document = [0] * 16
        with pytest.raises(AttentionError, match="test_attention_cpu.py:") as raised:
            cubridge.attention(q, k, v, mask_mod=documents, enable_gqa=True)
        assert "\n" not in str(raised.value)
    finally:
        document = saved


def test_a_binding_reads_what_the_hooks_capture_where_it_is_now_through_every_kind_of_step():
    """A binding reads the hooks' captured tensors and Python values on every call through readers made once from
    their paths: a global, a closure cell, a list's item, a functools.partial's function and its positional and
    keyword arguments. A tensor rebound (same dtype and shape) is the one the next call reads; a changed value,
    or a tensor of another shape, ends the binding."""
    import functools

    def make(cell, scales):
        def mask(offset, b, h, q_idx, kv_idx, window=0):
            return (document[q_idx] + cell[kv_idx] + scales[0] * (offset - q_idx + kv_idx)).abs() <= window
        return mask

    def ids():
        return torch.zeros(len(document), dtype=torch.int64)

    scales = [1]
    hook = functools.partial(make(ids(), scales), 1, window=3)
    binding = api._binding(None, hook, "softmax")[0]
    assert len(binding.captures_now((None, hook))) == 2
    cell = hook.func.__closure__[0]
    saved = document
    try:
        for step, rebind in (("global", lambda tensor: globals().__setitem__("document", tensor)),
                             ("closure", lambda tensor: setattr(cell, "cell_contents", tensor))):
            fresh = ids()
            rebind(fresh)
            assert any(tensor is fresh for tensor in binding.captures_now((None, hook))), step
        cell.cell_contents = ids()[:3]
        assert binding.captures_now((None, hook)) is None
    finally:
        globals()["document"] = saved
    cell.cell_contents = ids()
    assert binding.captures_now((None, hook)) is not None
    for values, key, changed in ((scales, 0, 2), (hook.keywords, "window", 4)):  # a list's item, a partial's keyword
        traced, values[key] = values[key], changed
        assert binding.captures_now((None, hook)) is None
        values[key] = traced
    assert binding.captures_now((None, hook)) is not None
    other = functools.partial(hook.func, 2, window=3)
    assert api._binding(None, other, "softmax")[0].key != binding.key  # the positional argument is a traced value


def test_an_attribute_the_hook_reads_changed_between_calls_is_another_variant():
    """A hook reading `config.window` (an object it captures), or a bound method reading `self.window`, gives
    flex_attention's result after the attribute changed: the call checks the value it traced with, and the trace
    key has it."""
    config = SimpleNamespace(window=2)

    def within(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= config.window

    class Layer:
        window = 2

        def mask(self, b, h, q_idx, kv_idx):
            return (q_idx - kv_idx).abs() <= self.window

    layer = Layer()
    q, k, v = inputs()
    for window in (2, 6, 2):
        config.window = layer.window = window
        out = cubridge.attention(q, k, v, mask_mod=within, enable_gqa=True)
        torch.testing.assert_close(out, flex(q, k, v, None, within)[0], atol=1e-5, rtol=1e-5)
        out = cubridge.attention(q, k, v, mask_mod=layer.mask, enable_gqa=True)  # a bound method: its self's
        torch.testing.assert_close(out, flex(q, k, v, None, within)[0], atol=1e-5, rtol=1e-5)


def test_a_closure_with_other_values_is_another_variant_and_equal_values_share_one():
    q, k, v = inputs()
    outputs = {}
    for window in (1, 3, 1):
        hook = sliding(window)
        outputs[window] = cubridge.attention(q, k, v, mask_mod=hook, enable_gqa=True)
        torch.testing.assert_close(outputs[window], flex(q, k, v, None, hook)[0], atol=1e-5, rtol=1e-5)
    keys = {api._binding(None, sliding(window), "softmax")[0].key for window in (1, 3, 1)}
    assert len(keys) == 2


def test_a_bound_call_costs_microseconds():
    import time

    hook = sliding(2)
    api._binding(softcap, hook, "softmax")
    start = time.perf_counter()
    for _ in range(1000):
        api._binding(softcap, hook, "softmax")
    assert (time.perf_counter() - start) / 1000 < 1e-4


def test_the_fallback_warns_once(monkeypatch):
    monkeypatch.setattr(api, "_warned", False)
    q, k, v = inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cubridge.attention(q, k, v, softcap, enable_gqa=True)
        cubridge.attention(q, k, v, softcap, enable_gqa=True)
    messages = [str(w.message) for w in caught if "eager PyTorch reference" in str(w.message)]
    assert len(messages) == 1 and caught[0].filename == __file__


def test_torch_compile_fullgraph_traces_the_op_and_keeps_captured_values_as_inputs():
    global document
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    def layer(q, k, v):
        return cubridge.attention(q, k, v, softcap, mask_mod=documents, enable_gqa=True, return_lse=True)

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend=counting_backend)
    q, k, v = inputs()
    saved = document
    try:
        for boundaries in ([0] * 5 + [1] * 7 + [2] * 4, [0] * 8 + [1] * 8):
            document = torch.tensor(boundaries)
            out, lse = compiled(q, k, v)
            expected_out, expected_lse = flex(q, k, v, softcap, documents)
            torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=1e-5)
        longer = [t.repeat(1, 1, 2, 1) for t in (q, k, v)]
        document = torch.tensor([0] * 32)
        compiled(*longer)
    finally:
        document = saved
    assert any("cubridge.attention" in str(node.target) for node in graphs[0].graph.nodes)
    assert len(graphs) == 2  # the new captured shape traces again; new values did not


def test_torch_compile_with_a_partial_or_bound_method_hook_is_a_one_line_error():
    """torch.compile cannot make a partial or a bound method a constant of its graph: the error says so and what
    to pass instead (eager calls take both)."""
    class Layer(torch.nn.Module):
        window = 2

        def mask(self, b, h, q_idx, kv_idx):
            return (q_idx - kv_idx).abs() <= self.window

        def forward(self, q, k, v):
            return cubridge.attention(q, k, v, mask_mod=self.mask, enable_gqa=True)

    torch._dynamo.reset()
    with pytest.raises(Exception, match="mask_mod: a method cannot be traced under torch.compile; pass a function"):
        torch.compile(Layer(), fullgraph=True, backend="eager")(*inputs())


def test_torch_compile_retraces_when_a_closure_value_changes():
    def layer(q, k, v, mask_mod):
        return cubridge.attention(q, k, v, mask_mod=mask_mod, enable_gqa=True)

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    q, k, v = inputs()
    for window in (1, 2, 3, 2):
        hook = sliding(window)
        torch.testing.assert_close(compiled(q, k, v, hook), flex(q, k, v, None, hook)[0], atol=1e-5, rtol=1e-5)


def test_the_fake_implementation_gives_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k, v = inputs()
        out, lse = torch.ops.cubridge.attention(q, k, v, [], [], [], "", 0.1, True)
    assert out.shape == q.shape and lse.shape == q.shape[:3] and lse.dtype == torch.float32


def wrong_arity(b, h, q_idx):
    return q_idx > 0


def unsupported(score, b, h, q_idx, kv_idx):
    return torch.sort(score)[0]


@pytest.mark.parametrize("call,message", [
    (lambda q, k, v: cubridge.attention(q, k, v, mask_mod=wrong_arity, enable_gqa=True),
     r"test_attention_cpu.py:\d+: error: wrong_arity takes \(b, h, q_idx, kv_idx\)"),
    (lambda q, k, v: cubridge.attention(q, k, v, unsupported, enable_gqa=True),
     r"test_attention_cpu.py:\d+: error: unsupported operation 'aten.sort.default'"),
    (lambda q, k, v: cubridge.attention(q[0], k, v, enable_gqa=True), r"query must be 4-D"),
    (lambda q, k, v: cubridge.attention(q, k.double(), v, enable_gqa=True), r"dtypes differ"),
    (lambda q, k, v: cubridge.attention(q.int(), k, v, enable_gqa=True), r"query has dtype torch.int32"),
    (lambda q, k, v: cubridge.attention(q, k, v), r"enable_gqa: query has 4 heads and key/value 2"),
    (lambda q, k, v: cubridge.attention(q[:, :3], k, v, enable_gqa=True), r"multiple of key/value heads"),
    (lambda q, k, v: cubridge.attention(q, k, v[..., :16], enable_gqa=True),
     r"value head dim 16 differs from the query/key head dim \d+: CuBridge's kernels take one head dim"),
    (lambda q, k, v: cubridge.attention(q, k, v[:, :, :8], enable_gqa=True), r"key and value shapes differ"),
    (lambda q, k, v: cubridge.attention(q, k, v, enable_gqa=True, scale=-1.0), r"scale must be a positive"),
    (lambda q, k, v: cubridge.attention(q, k, v, enable_gqa=True, normalization="tanh"), r"normalization must"),
    (lambda q, k, v: cubridge.attention(q, k, v, enable_gqa=True, normalization="relu", return_lse=True),
     r"return_lse: the relu normalization has no log-sum-exp"),
    (lambda q, k, v: cubridge.attention(q.requires_grad_(), k, v, enable_gqa=True), r"forward pass only"),
    (lambda q, k, v: cubridge.attention(q, k, v, score_mod=3, enable_gqa=True), r"score_mod must be a function"),
    (lambda q, k, v: cubridge.attention(q, k, v, block_mask=causal, enable_gqa=True), r"block_mask must be"),
    (lambda q, k, v: cubridge.attention(q, k, v, block_mask=create_block_mask(causal, None, None, 16, 16, "cpu"),
                                        mask_mod=documents, enable_gqa=True), r"mask_mod and block_mask"),
    (lambda q, k, v: cubridge.attention(q, k, v, block_mask=create_block_mask(causal, None, None, 8, 16, "cpu"),
                                        enable_gqa=True), r"block_mask: made for Q_LEN, KV_LEN = \(8, 16\), shorter "
                                                          r"than the inputs' 16, 16: make a BlockMask"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(call, message):
    with pytest.raises(AttentionError, match=message) as caught:
        call(*inputs())
    assert "\n" not in str(caught.value)


def test_a_captured_tensor_too_short_for_the_sequence_is_a_located_error():
    q, k, v = inputs(seqlen=32)
    with pytest.raises(AttentionError, match=r"test_attention_cpu.py:\d+: error: captured tensor 'document' has 16 "):
        cubridge.attention(q, k, v, mask_mod=documents, enable_gqa=True)


def strided_from_three(b, h, q_idx, kv_idx):
    return (q_idx // (kv_idx - 3)) >= 0


def test_a_hook_that_divides_by_zero_is_a_located_error():
    """torch's CPU division raised `RuntimeError: ZeroDivisionError` from inside the eager reference."""
    q, k, v = inputs(seqlen=32)
    with pytest.raises(AttentionError, match=r"test_attention_cpu.py:\d+: error: integer division by zero: the "
                                             r"divisor of a floor division in the hook is 0 for q \[") as caught:
        cubridge.attention(q, k, v, mask_mod=strided_from_three, enable_gqa=True)
    assert "\n" not in str(caught.value)


bias = torch.tensor(0.5)


def biased(score, b, h, q_idx, kv_idx):
    return score * bias


def test_a_zero_dimensional_tensor_is_a_constant_guarded_by_value():
    global bias
    q, k, v = inputs()
    saved = bias
    try:
        for value in (0.5, 2.0):
            bias = torch.tensor(value)
            out = cubridge.attention(q, k, v, biased, enable_gqa=True)
            expected = flex(q, k, v, lambda score, b, h, q_idx, kv_idx: score * value, None)[0]
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        compiled = torch.compile(lambda q, k, v: cubridge.attention(q, k, v, biased, enable_gqa=True),
                                 fullgraph=True, backend="aot_eager")
        with pytest.raises(Exception, match="reads the 0-d tensor 'bias', which is compiled in as a constant"):
            compiled(q, k, v)
    finally:
        bias = saved


long_document = torch.repeat_interleave(torch.arange(4), torch.tensor([100, 60, 90, 50]))


def long_documents(b, h, q_idx, kv_idx):
    return long_document[q_idx] == long_document[kv_idx]


def later_documents(b, h, q_idx, kv_idx):
    return long_document[q_idx] <= long_document[kv_idx]


def test_the_quick_verification_runs_the_traced_hooks_and_rejects_a_wrong_kernel(tmp_path, monkeypatch):
    import dataclasses

    from cubridge.diagnostics import CuBridgeError
    from cubridge.frontends.spec import spec_from_hooks
    from cubridge.runtime.variant import build_variant

    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))

    def unusable(*args):
        raise RuntimeError("reads a tensor on another device")

    spec = spec_from_hooks(mask_mod=long_documents)
    kernel = build_variant(dataclasses.replace(spec, mask_mod=unusable), "sm90", verify=api.quick_verify)
    assert len(list((tmp_path / "verified").iterdir())) == 1
    other = spec_from_hooks(mask_mod=later_documents)  # a spec the kernel does not compute
    with pytest.raises(CuBridgeError, match="failed its quick verification: mismatch"):
        api.quick_verify(other, kernel.transferred)


def test_the_gpu_dispatch_builds_once_and_passes_captures_and_block_lists(monkeypatch, tmp_path):
    """The GPU branch of the op with the launch replaced by a recorder (no GPU here): the variant is built and
    quickly verified once, the launch gets the captured tensors' current values, and a BlockMask's lists with
    their block size (the kernel decides whether they fit)."""
    global document
    from cubridge.runtime import variant as variant_module

    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_reference_for", lambda device: "sm90")
    builds, launches = [], []
    build_variant = variant_module.build_variant
    monkeypatch.setattr(variant_module, "build_variant",
                        lambda *args, **kwargs: builds.append(args) or build_variant(*args, **kwargs))

    def plan_for(self, layout, q, k, v, scale, return_lse, captures, given=None):
        assert layout == layout_key(q, k, v)
        return SimpleNamespace(call=(self.reference, scale, return_lse), uses_given_lists=True)

    def run(self, plan, q, k, v, captures, given=None):
        reference, scale, return_lse = plan.call
        launches.append((reference, captures, given, scale))
        return torch.zeros_like(q), torch.zeros(q.shape[:3]) if return_lse else None

    monkeypatch.setattr(variant_module.VariantKernel, "plan_for", plan_for)
    monkeypatch.setattr(variant_module.VariantKernel, "run", run)
    monkeypatch.setattr(api, "_VARIANTS", {})
    monkeypatch.setattr(api, "_BINDINGS", {})
    q, k, v = inputs()
    saved = document
    try:
        cubridge.attention(q, k, v, mask_mod=documents, enable_gqa=True)
        document = torch.tensor([0] * 8 + [1] * 8)
        block_mask = create_block_mask(documents, None, None, 16, 16, device="cpu")
        out, lse = cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True, return_lse=True, scale=0.5)
    finally:
        document = saved
    assert len(builds) == 1 and len(launches) == 2
    (_, first, no_lists, _), (reference, second, given, scale) = launches
    assert reference == "sm90" and no_lists is None and scale == 0.5
    assert first == [saved] and torch.equal(second[0], torch.tensor([0] * 8 + [1] * 8))
    assert given.lists == (block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.full_kv_num_blocks,
                           block_mask.full_kv_indices)
    assert given.block_size == (128, 128) and given.seq_lengths == (16, 16)
    assert out.shape == q.shape and lse.shape == q.shape[:3]


class RecordedPlan:
    """A launch plan stand-in for the GPU branch on this machine: records its calls' tensors. It takes a given
    BlockMask's lists (as an sm80 plan whose tiles they fit) unless `uses_given_lists` says not."""

    uses_given_lists = True

    def __init__(self, plans: list, layout: tuple, return_lse: bool):
        self.layout, self.return_lse, self.runs = layout, return_lse, []
        plans.append(self)

    def run(self, q, captures=(), given=None):
        self.runs.append((q, list(captures), given))
        return torch.zeros_like(q), torch.zeros(q.shape[:3]) if self.return_lse else None


def _recorded_gpu_branch(monkeypatch, tmp_path) -> list[RecordedPlan]:
    """cubridge.attention's GPU branch on this machine: the sm90 reference, empty caches, and variant plans
    recorded (the list returned) instead of launched."""
    from cubridge.runtime import variant as variant_module

    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_reference_for", lambda device: "sm90")
    for name in ("_VARIANTS", "_BINDINGS", "_CALLS"):
        monkeypatch.setattr(api, name, {})
    plans: list[RecordedPlan] = []
    monkeypatch.setattr(variant_module.VariantKernel, "plan_for",
                        lambda self, layout, q, k, v, scale, return_lse, captures, given=None:
                        RecordedPlan(plans, layout, return_lse))
    monkeypatch.setattr(variant_module.VariantKernel, "run",
                        lambda self, plan, q, k, v, captures, given=None: plan.run(q, captures, given))
    return plans


def test_a_repeated_call_runs_bound_to_its_plan_and_notices_what_changed(monkeypatch, tmp_path):
    """The GPU branch with recorded launch plans (no GPU here): a call repeated with the same hooks, BlockMask,
    scale and flags on inputs of the same layout skips the checks and plan lookups, and still gets the captured
    tensors' current objects, the BlockMask's current lists and grad mode's refusal; a rebound captured tensor,
    a changed Python value, another layout or other flags take the checked path and a new plan."""
    plans = _recorded_gpu_branch(monkeypatch, tmp_path)
    monkeypatch.setattr(api, "_plain_planner", lambda reference: lambda layout, q, k, v, causal, scale, return_lse:
                        RecordedPlan(plans, layout, return_lse))
    monkeypatch.setattr(RecordedPlan, "enqueue", lambda self, q, k, v: self.run(q), raising=False)
    checks = []
    check = api._check
    monkeypatch.setattr(api, "_check", lambda *args: checks.append(args) or check(*args))
    ids = document.clone()
    width = 20.0

    def in_documents(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    def capped(score, b, h, q_idx, kv_idx):
        return width * torch.tanh(score / width)

    q, k, v = inputs()
    for _ in range(3):
        cubridge.attention(q, k, v, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 1 and len(plans[0].runs) == 3 and len(checks) == 1
    ids.add_(1)  # new values in place: the same tensor, still bound
    cubridge.attention(q, k, v, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 1 and plans[0].runs[-1][1] == [ids] and len(checks) == 1
    ids = torch.zeros(32, dtype=torch.int64)  # rebound to another shape: another variant
    cubridge.attention(q, k, v, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 2 and plans[1].runs[-1][1][0] is ids
    width = 10.0  # a Python value the hook reads: another variant
    cubridge.attention(q, k, v, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 3 and len(checks) == 3
    q2, k2, v2 = inputs(seqlen=24)  # another layout
    cubridge.attention(q2, k2, v2, capped, mask_mod=in_documents, enable_gqa=True)
    cubridge.attention(q2, k2, v2, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 4 and len(plans[3].runs) == 2 and plans[3].layout == layout_key(q2, k2, v2)
    out, lse = cubridge.attention(q2, k2, v2, capped, mask_mod=in_documents, enable_gqa=True, return_lse=True)
    assert len(plans) == 5 and lse.shape == q2.shape[:3]
    with pytest.raises(AttentionError, match="forward pass only"):
        cubridge.attention(q2.requires_grad_(), k2, v2, capped, mask_mod=in_documents, enable_gqa=True)
    with torch.no_grad():
        cubridge.attention(q2, k2, v2, capped, mask_mod=in_documents, enable_gqa=True)
    assert len(plans) == 5
    for _ in range(2):
        cubridge.attention(q, k, v, enable_gqa=True)  # no hooks: the reference kernel's plan
    assert len(plans) == 6 and len(plans[5].runs) == 2

    block_mask = create_block_mask(in_documents, None, None, 16, 16, device="cpu")
    for _ in range(2):
        cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
    first_lists = plans[-1].runs[-1][2]
    assert len(plans[-1].runs) == 2 and plans[-1].runs[0][2] is first_lists
    block_mask.kv_num_blocks.zero_()  # its lists changed in place: new lists, a new plan
    cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
    assert plans[-1].runs[-1][2] is not first_lists and len(plans[-1].runs) == 1
    cubridge.attention(q, k, v, enable_gqa=True)  # a call without a BlockMask has its own binding
    cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
    assert len(plans[-1].runs) == 2
    other = create_block_mask(in_documents, None, None, 16, 16, device="cpu")  # another BlockMask replaces it
    for _ in range(2):
        cubridge.attention(q, k, v, block_mask=other, enable_gqa=True)
    assert len(plans[-1].runs) == 2 and plans[-1].runs[-1][2].lists[0] is other.kv_num_blocks
    assert len(api._CALLS) == 4  # with and without lse, no hooks, a BlockMask



def test_a_bound_call_ignores_the_block_mask_lists_its_kernel_does_not_take(monkeypatch, tmp_path):
    """A Hopper block-list plan builds its own lists beside its mask bits: a repeated call with the same BlockMask
    stays bound without reading the BlockMask's lists, also after they changed in place, and runs without them."""
    plans = _recorded_gpu_branch(monkeypatch, tmp_path)
    monkeypatch.setattr(RecordedPlan, "uses_given_lists", False)
    read = []
    lists_of = api._block_mask_lists
    monkeypatch.setattr(api, "_block_mask_lists", lambda *args: read.append(args) or lists_of(*args))
    ids = document.clone()

    def in_documents(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    q, k, v = inputs()
    block_mask = create_block_mask(in_documents, None, None, 16, 16, device="cpu")
    cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
    assert len(read) == 1  # the checked call
    block_mask.kv_num_blocks.zero_()
    for _ in range(2):
        cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
    assert len(plans) == 1 and len(plans[0].runs) == 3 and len(read) == 1
    assert [given for *_, given in plans[0].runs[1:]] == [None, None]

def test_a_block_masks_lists_are_one_object_until_its_tensors_change():
    """The BlockMask's lists are given to the kernel as the same object while its tensors are unchanged (the kernel
    keeps their expansion while it gets the same object); an in-place change of one of them, or another tensor,
    gives a new one."""
    block_mask = create_block_mask(causal, None, None, 300, 300, device="cpu")
    lists, shape = api._block_mask_lists(block_mask, "variant")
    first = api._given_lists(lists, shape)
    assert api._given_lists(*api._block_mask_lists(block_mask, "variant")) is first
    assert first.block_size == (128, 128) and first.seq_lengths == (300, 300)
    block_mask.kv_num_blocks[0, 0, 0] = 0
    changed = api._given_lists(lists, shape)
    assert changed is not first and api._given_lists(lists, shape) is changed
    block_mask.kv_indices = block_mask.kv_indices.clone()
    assert api._given_lists(*api._block_mask_lists(block_mask, "variant")) is not changed


def _listed_blocks(num_blocks, indices, block_size, length):
    """The dense mask block lists describe where every listed block keeps all its keys."""
    batch, heads, q_blocks = num_blocks.shape
    dense = torch.zeros(batch, heads, length, length, dtype=torch.bool)
    for b, h, i in np.ndindex(batch, heads, q_blocks):
        for j in indices[b, h, i, :num_blocks[b, h, i]].tolist():
            dense[b, h, i * block_size:(i + 1) * block_size, j * block_size:(j + 1) * block_size] = True
    return dense


@pytest.mark.parametrize("planes", [(1, 1), (2, 4)], ids=["shared", "per-head"])
def test_a_blockmask_without_a_mask_mod_keeps_the_listed_blocks(planes):
    """BlockMask.from_kv_blocks without a mask_mod (noop_mask): the lists are the mask, as FlexAttention's compiled
    kernels compute it (its eager path ignores them); partial and full lists alike keep every key of a block."""
    q, k, v = (t.repeat_interleave(2, dim=1) for t in inputs(seqlen=32, heads_q=2, heads_kv=2))
    generator = torch.Generator().manual_seed(len(planes))
    num_blocks = torch.randint(0, 3, (*planes, 4), generator=generator, dtype=torch.int32)
    indices = torch.stack([torch.randperm(4, generator=generator) for _ in range(planes[0] * planes[1] * 4)])
    indices = indices.view(*planes, 4, 4).to(torch.int32)
    full_num = torch.ones(*planes, 4, dtype=torch.int32)
    full_indices = torch.zeros(*planes, 4, 4, dtype=torch.int32)  # kv block 0 as a full block everywhere
    block_mask = BlockMask.from_kv_blocks(num_blocks, indices, full_num, full_indices, BLOCK_SIZE=8)
    keep = _listed_blocks(num_blocks, indices, 8, 32) | _listed_blocks(full_num, full_indices, 8, 32)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(cubridge.attention(q, k, v, block_mask=block_mask), expected, atol=1e-5, rtol=1e-5)
    num_blocks.zero_()  # changed in place: the next call (bound to the first) sees the lists now
    keep = _listed_blocks(full_num, full_indices, 8, 32)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(cubridge.attention(q, k, v, block_mask=block_mask), expected, atol=1e-5, rtol=1e-5)


def test_a_blockmask_without_a_mask_mod_under_torch_compile_is_a_one_line_error():
    q, k, v = inputs(seqlen=32, heads_q=2, heads_kv=2)
    diagonal = torch.stack([torch.arange(4, dtype=torch.int32).roll(-row) for row in range(4)]).view(1, 1, 4, 4)
    block_mask = BlockMask.from_kv_blocks(torch.ones(1, 1, 4, dtype=torch.int32), diagonal, BLOCK_SIZE=8)
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: cubridge.attention(q, k, v, block_mask=block_mask), fullgraph=True,
                             backend="eager")
    with pytest.raises(Exception, match="block_mask: a BlockMask without a mask_mod .* is taken in eager calls "
                                        "only; under torch.compile build it with create_block_mask"):
        compiled(q, k, v)
