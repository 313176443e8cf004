"""The spec frontend: references, captures and kernel inputs."""

import dataclasses
import math
from pathlib import Path

import pytest
import torch
from xdsl.dialects.builtin import FileLineColLoc

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.expr import Expr, evaluate
from cubridge.frontends.spec import load_spec
from cubridge.interpreter.inputs import kernel_inputs

from transfer_helpers import load_program, spec_path, transferred

REPOSITORY = Path(__file__).resolve().parents[2]


def random_qkv(batch=2, heads=4, kv_heads=2, seqlen_q=37, seqlen_kv=53, dim=16):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(batch, heads, seqlen_q, dim, generator=generator, dtype=torch.float64)
    k, v = (torch.randn(batch, kv_heads, seqlen_kv, dim, generator=generator, dtype=torch.float64) for _ in range(2))
    return q, k, v


def test_user_reference_agrees_with_the_materialized_hooks():
    spec = load_spec(spec_path("causal"))
    hooks_only = dataclasses.replace(spec, user_reference=None)
    q, k, v = random_qkv()
    torch.testing.assert_close(spec.reference(q, k, v, 0.25), hooks_only.reference(q, k, v, 0.25))


def test_fully_masked_rows_give_zero_output_and_minus_infinite_lse():
    spec = load_spec(spec_path("document_mask"))
    q, k, v = random_qkv(seqlen_q=60, seqlen_kv=30)  # queries from document 1 on see no key
    output, lse = spec.reference(q, k, v, 0.25), spec.reference_lse(q, k, v, 0.25)
    assert torch.all(output[:, :, 40:] == 0)
    assert torch.all(lse[:, :, 40:] == -math.inf)
    assert torch.isfinite(lse[:, :, :37]).all()


def test_lse_only_for_softmax():
    q, k, v = random_qkv()
    assert load_spec(spec_path("sigmoid")).reference_lse(q, k, v, 0.25) is None


def test_captured_tensors_become_kernel_inputs():
    spec = load_spec(spec_path("alibi"))
    assert list(spec.captures) == ["alibi_slopes"]
    kernel = next(op for op in transferred("sm80", spec_path("alibi")).walk() if op.name == "cuir.kernel")
    q, k, v = random_qkv()
    inputs = kernel_inputs(spec, kernel, q, k, v)
    assert list(inputs) == ["alibi_slopes"]
    assert inputs["alibi_slopes"].dtype.name == "float32"


def test_reference_kernel_takes_no_extra_inputs():
    _, module = load_program("sm90")
    kernel = next(op for op in module.walk() if op.name == "cuir.kernel")
    assert kernel_inputs(load_spec(spec_path("alibi")), kernel, *random_qkv()) == {}


def test_data_dependent_mask_gets_block_lists():
    spec = load_spec(spec_path("document_mask"))
    kernel = next(op for op in transferred("sm90", spec_path("document_mask")).walk() if op.name == "cuir.kernel")
    q, k, v = random_qkv(seqlen_q=300, seqlen_kv=300)
    inputs = kernel_inputs(spec, kernel, q, k, v)
    assert list(inputs) == ["document_id", "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"]
    assert inputs["kv_num_blocks"].shape == inputs["full_kv_num_blocks"].shape == (2, 4, 3)  # [B, HQ, q tiles of 128]
    assert inputs["kv_indices"].shape == inputs["full_kv_indices"].shape == (2, 4, 3, 3)  # [..., kv tiles of 128]
    assert all(table.dtype.name == "int32" for table in inputs.values())
    # documents of 37, 120, 5, 64, 200 tokens: rows 0..127 see keys 0..156 (kv tiles 0, 1),
    # and no 128 x 128 tile of theirs is full
    assert inputs["kv_num_blocks"][0, 0].tolist() == [2, 3, 2]
    assert inputs["kv_indices"][0, 0, 0, :2].tolist() == [0, 1]
    # rows 256..299 are all in the last document (226..425): kv tiles 1 and 2, none full
    assert inputs["kv_indices"][0, 0, 2, :2].tolist() == [1, 2]
    assert inputs["full_kv_num_blocks"][0, 0].tolist() == [0, 0, 0]


def test_eager_attention_gives_the_hooks_it_was_written_with():
    spec = load_spec(spec_path("eager_causal_softcap"))
    assert spec.normalization == "softmax"
    q, k, v = random_qkv()
    b, h = torch.arange(2).view(-1, 1, 1, 1), torch.arange(4).view(1, -1, 1, 1)
    q_idx, kv_idx = torch.arange(37).view(1, 1, -1, 1), torch.arange(53).view(1, 1, 1, -1)
    torch.testing.assert_close(spec.mask_mod(b, h, q_idx, kv_idx), (kv_idx <= q_idx).expand(1, 1, 37, 53))
    score = torch.linspace(-9, 9, 53, dtype=torch.float64)
    torch.testing.assert_close(spec.score_mod(score, b, h, q_idx, kv_idx), 2.5 * torch.tanh(score / 2.5))
    hooks_only = dataclasses.replace(spec, user_reference=None)
    torch.testing.assert_close(hooks_only.reference(q, k, v, 0.25), spec.reference(q, k, v, 0.25))


def test_eager_attention_in_its_common_spellings(tmp_path):
    """`/ math.sqrt(q.size(3))`, `k.mT`, `L, S = scores.shape[-2:]`, `scores.size(-1)`, positive dimensions and
    Hugging Face's `softmax(..., dtype=torch.float32).to(v.dtype)` are the usual ways to write the scale, the
    sizes and P (they were refused, or raised TypeError for the shape slice)."""
    path = tmp_path / "spec.py"
    path.write_text("import math\n"
                    "import torch\n"
                    "def attention(q, k, v):\n"
                    "    scores = torch.matmul(q, k.mT) / math.sqrt(q.size(3))\n"
                    "    L, S = scores.shape[-2:]\n"
                    "    keep = torch.arange(L)[:, None] >= torch.arange(scores.size(-1))[None, :]\n"
                    "    scores = scores.masked_fill(~keep, float('-inf'))\n"
                    "    return torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype) @ v\n")
    spec = load_spec(str(path))
    assert spec.score_expr is None
    q_idx, kv_idx = torch.arange(40).view(40, 1), torch.arange(50)
    assert torch.equal(_mask_on_grid(spec)[0, 0], q_idx >= kv_idx)
    q, k, v = random_qkv(kv_heads=4)
    hooks_only = dataclasses.replace(spec, user_reference=None)
    torch.testing.assert_close(hooks_only.reference(q, k, v, 0.25), spec.reference(q, k, v, 0.25))


SDPA_REFERENCE_MASKS = {  # torch's documented SDPA reference and its relatives: masks made of torch.ones / full
    "sdpa reference": ("    attn_bias = torch.zeros(L, S, dtype=q.dtype)\n"
                       "    temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)\n"
                       "    attn_bias = attn_bias.masked_fill(temp_mask.logical_not(), float('-inf'))\n"
                       "    scores = scores + attn_bias\n", lambda q_idx, kv_idx: kv_idx <= q_idx),
    "additive triu": ("    scores = torch.full((L, S), float('-inf')).triu(diagonal=2) + scores\n",
                      lambda q_idx, kv_idx: kv_idx - q_idx < 2),
    "masked_fill of a tril": ("    keep = torch.ones(1, 1, L, S, dtype=torch.bool).tril(1)\n"
                              "    scores = scores.masked_fill(~keep, float('-inf'))\n",
                              lambda q_idx, kv_idx: kv_idx <= q_idx + 1),
}


@pytest.mark.parametrize("name", SDPA_REFERENCE_MASKS)
def test_eager_masks_made_of_tensors_of_the_score_shape_are_masks(tmp_path, name):
    """torch.ones(L, S) had been called with fx's proxies (`ones() takes 1 positional argument`); an additive
    bias of 0 and -inf is a mask (its empty tiles skipped), not a score_mod."""
    body, expected = SDPA_REFERENCE_MASKS[name]
    path = tmp_path / "spec.py"
    path.write_text("import torch\n"
                    "def attention(q, k, v):\n"
                    "    L, S = q.size(-2), k.size(-2)\n"
                    "    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5\n"
                    f"{body}"
                    "    return torch.softmax(scores, dim=-1) @ v\n")
    spec = load_spec(str(path))
    assert spec.score_expr is None
    q_idx, kv_idx = torch.arange(40).view(40, 1), torch.arange(50)
    assert torch.equal(_mask_on_grid(spec)[0, 0], expected(q_idx, kv_idx))
    q, k, v = random_qkv(kv_heads=4, seqlen_q=40, seqlen_kv=50)
    hooks_only = dataclasses.replace(spec, user_reference=None)
    torch.testing.assert_close(hooks_only.reference(q, k, v, 0.25), spec.reference(q, k, v, 0.25))


def test_an_in_place_method_in_eager_attention_is_a_located_error(tmp_path):
    """fx records `bias.masked_fill_(...)` as a node that later uses of `bias` do not read: the mask was lost."""
    path = tmp_path / "spec.py"
    path.write_text("import torch\n"
                    "def attention(q, k, v):\n"
                    "    bias = torch.zeros(q.size(-2), k.size(-2))\n"
                    "    bias.masked_fill_(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).triu(1), -1e9)\n"
                    "    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5 + bias\n"
                    "    return torch.softmax(scores, dim=-1) @ v\n")
    with pytest.raises(CuBridgeError) as error:
        load_spec(str(path))
    assert str(error.value) == (f"{path}:2: error: eager attention: in-place 'masked_fill_' is not supported: use "
                                "'masked_fill' and its result")


def test_a_failing_eager_reference_is_a_located_error(tmp_path):
    """The eager function is the ground truth, run on float64 inputs: its failure there is one located line."""
    path = tmp_path / "spec.py"
    path.write_text("import torch\n"
                    "def attention(q, k, v):\n"
                    "    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5\n"
                    "    return torch.softmax(scores, dim=-1, dtype=torch.float32) @ v\n")
    spec = load_spec(str(path))
    with pytest.raises(CuBridgeError) as error:
        spec.reference(*random_qkv(kv_heads=4), 0.25)
    assert str(error.value).startswith(f"{path}:4: error: running attention failed: RuntimeError: expected ")


def test_eager_function_that_is_not_attention_is_a_located_error(tmp_path):
    path = tmp_path / "spec.py"
    path.write_text("def attention(q, k, v):\n    return q @ k.transpose(-2, -1)\n")
    with pytest.raises(CuBridgeError) as error:
        load_spec(str(path))
    assert str(error.value) == (
        f"{path}:1: error: eager attention: the result is not P @ v for P = softmax/sigmoid/relu of the scores"
    )


def test_ops_of_a_hook_carry_the_spec_line_they_were_traced_from():
    path = spec_path("alibi")
    spec = load_spec(path)
    assert spec.score_expr.line == 13 and spec.mask_expr.line == 17
    module = transferred("sm80", path)
    lines = {
        op.name: op.location.line.data
        for op in module.walk()
        if isinstance(op.location, FileLineColLoc) and op.location.filename.data == path
    }
    assert lines["cuir.gather"] == 13 and lines["arith.addf"] == 13 and lines["arith.cmpi"] == 17


def test_tensors_captured_by_flexattention_combinators_are_found(tmp_path):
    path = tmp_path / "spec.py"
    path.write_text(
        "import torch\n"
        "from torch.nn.attention.flex_attention import and_masks\n"
        "document = torch.zeros(300, dtype=torch.int64)\n"
        "unused = torch.ones(3)\n"
        "def same_document(b, h, q_idx, kv_idx):\n"
        "    return document[q_idx] == document[kv_idx]\n"
        "def causal(b, h, q_idx, kv_idx):\n"
        "    unused.shape\n"
        "    return q_idx >= kv_idx\n"
        "mask_mod = and_masks(causal, same_document)\n"
    )
    spec = load_spec(str(path))
    assert list(spec.captures) == ["document"]
    assert spec.mask_expr.leaves() == {"document", "q_idx", "kv_idx"}


def _mask_on_grid(spec):
    b, h, q_idx, kv_idx = (torch.arange(n).view(*(n if d == i else 1 for d in range(4))) for i, n in
                           enumerate((2, 3, 40, 50)))
    return spec.broadcast_hooks("cpu")[1](b, h, q_idx, kv_idx).expand(2, 3, 40, 50)


def test_a_hook_with_a_defaulted_parameter_is_traced_with_its_default(tmp_path):
    """FlexAttention calls mask_mod(b, h, q_idx, kv_idx), so `window=16` keeps its default (make_fx traced the
    parameter as a fifth input and failed)."""
    path = tmp_path / "window.py"
    path.write_text("def mask_mod(b, h, q_idx, kv_idx, window=16):\n"
                    "    return (q_idx - kv_idx).abs() < window\n")
    spec = load_spec(str(path))
    q_idx, kv_idx = torch.arange(40).view(40, 1), torch.arange(50)
    assert torch.equal(_mask_on_grid(spec)[0, 0], (q_idx - kv_idx).abs() < 16)


def test_traced_hooks_make_index_floats_float32_as_the_hook_does(tmp_path):
    """A T5 bucket truncates log(d / 8) / log(16) * 8, which is exactly 2 in float32 at d = 16 (as the hook computes
    it) but just below 2 in float64: the traced hooks (the GPU's reference, the host-made masks) must agree."""
    path = tmp_path / "t5.py"
    path.write_text("import math\n"
                    "import torch\n"
                    "def mask_mod(b, h, q_idx, kv_idx):\n"
                    "    distance = (q_idx - kv_idx).abs().clamp(min=1)\n"
                    "    return (torch.log(distance.float() / 8) / math.log(16) * 8).long() % 2 == 0\n")
    spec = load_spec(str(path))
    q_idx, kv_idx = torch.arange(40).view(40, 1), torch.arange(50)
    distance = (q_idx - kv_idx).abs().clamp(min=1)
    expected = (torch.log(distance.float() / 8) / math.log(16) * 8).long() % 2 == 0
    assert expected[16, 0]  # bucket 2 in float32; float64 gives bucket 1
    assert torch.equal(_mask_on_grid(spec)[0, 0], expected)


def test_integer_bitwise_operations_are_traced_with_torchs_semantics(tmp_path):
    """`&`, `|`, `^`, `~`, `<<` and `>>` (arithmetic: a negative distance stays negative) on integer indices, and
    a boolean operand counted as 0 or 1."""
    path = tmp_path / "bits.py"
    path.write_text("def mask_mod(b, h, q_idx, kv_idx):\n"
                    "    bits = (~kv_idx & 3) == ((q_idx ^ (kv_idx << 1)) | (h > 1))\n"
                    "    return ((q_idx - kv_idx) >> 3 == -1) | bits\n")
    spec = load_spec(str(path))
    h, q_idx, kv_idx = torch.arange(3).view(3, 1, 1), torch.arange(40).view(40, 1), torch.arange(50)
    expected = ((q_idx - kv_idx) >> 3 == -1) | ((~kv_idx & 3) == ((q_idx ^ (kv_idx << 1)) | (h > 1)))
    assert torch.equal(_mask_on_grid(spec)[1], expected)


def test_an_object_called_as_a_hook_is_traced_through_its_call(tmp_path):
    """A hook may be an instance of a class with `__call__` (traced as a bound method); an object that is no
    Python function is one located line, not an AttributeError."""
    path = tmp_path / "window.py"
    path.write_text("class Window:\n"
                    "    def __init__(self, size):\n"
                    "        self.size = size\n"
                    "    def __call__(self, b, h, q_idx, kv_idx):\n"
                    "        return (q_idx >= kv_idx) & (q_idx - kv_idx < self.size)\n"
                    "mask_mod = Window(8)\n")
    spec = load_spec(str(path))
    q_idx, kv_idx = torch.arange(40).view(40, 1), torch.arange(50)
    assert torch.equal(_mask_on_grid(spec)[1, 2], (q_idx >= kv_idx) & (q_idx - kv_idx < 8))
    path.write_text("import math\n\nscore_mod = math.fabs\n")
    with pytest.raises(CuBridgeError) as error:
        load_spec(str(path))
    assert str(error.value) == (f"{path}:3: error: score_mod must be a function score_mod(score, b, h, q_idx, "
                                "kv_idx), got builtin_function_or_method")


def test_a_hooks_constants_are_made_on_its_indices_device():
    """and_masks starts from a constant True; made on the CPU, torch.logical_and refused it beside the GPU's index
    grids when a variant built its mask planes (the H200, run 207). The constants follow the indices' device
    (here the meta device, which a CPU-only machine has)."""
    spec = load_spec(str(REPOSITORY / "tests" / "runtime" / "specs" / "combined_masks.py"))
    index = torch.arange(6, device="meta")
    kept = spec.mask_on("meta")(index.view(-1, 1, 1, 1), index.view(1, -1, 1, 1), index.view(1, 1, -1, 1),
                                index.view(1, 1, 1, -1))
    assert kept.device.type == "meta"
    constants = [node for node in _nodes(spec.mask_expr) if node.op == "const"]
    assert constants
    for node in constants:
        assert evaluate(node, {"q_idx": index}).device.type == "meta"


def test_a_hooks_intermediates_die_when_it_returns(monkeypatch):
    """Each intermediate of a traced hook is a chunk of scores in size. The evaluator's memo sat in a reference
    cycle (its `visit` calls itself), so every chunk's intermediates lived on until the cycle collector ran: the
    float64 reference of the T5 buckets at S = 16k ran out of an H100's 80 GB (run 268)."""
    import gc
    import weakref

    import cubridge.frontends.expr as expr_module

    spec = load_spec(str(REPOSITORY / "examples" / "specs" / "t5_buckets.py"))
    made = []
    evaluate_node = expr_module._evaluate_node

    def recording(*args):
        value = evaluate_node(*args)
        made.append(weakref.ref(value))
        return value

    monkeypatch.setattr(expr_module, "_evaluate_node", recording)
    score_mod, _ = spec.broadcast_hooks("cpu")
    scores = torch.zeros(1, 1, 8, 16, dtype=torch.float64)
    gc.disable()
    try:
        result = score_mod(scores, torch.zeros(1, 1, 1, 1, dtype=torch.long), torch.full((1, 1, 1, 1), 3),
                           torch.arange(8).view(1, 1, -1, 1), torch.arange(16).view(1, 1, 1, -1))
        alive = [tensor for ref in made if (tensor := ref()) is not None]
    finally:
        gc.enable()
    assert len(made) > 10
    assert [tensor for tensor in alive if tensor.shape == scores.shape and tensor is not scores] == [result]


def _nodes(expr):
    yield expr
    for arg in expr.args:
        if isinstance(arg, Expr):
            yield from _nodes(arg)


def test_traced_hooks_run_on_index_grids_without_vmap(monkeypatch):
    """The traced hooks evaluate on broadcast index grids (torch 2.11's vmap refused a division in them), and
    give the user hooks' result."""
    spec = load_spec(spec_path("softcap"))
    q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
    expected = spec.reference(q, k, v, 0.25)
    traced = spec.with_traced_hooks()

    def no_vmap(*args, **kwargs):
        raise AssertionError("traced hooks must not be vmapped")

    monkeypatch.setattr(torch, "vmap", no_vmap)
    torch.testing.assert_close(traced.reference(q, k, v, 0.25), expected)
