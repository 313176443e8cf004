"""The default verification: derived shapes, wide inputs, the row-sum column,
fully masked rows and the FlashAttention tolerance."""

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import KernelPlan, ProblemShape, StandardAttention, execute, verify
from cubridge.interpreter.executor import find_kernel
from cubridge.interpreter.inputs import block_list_tables
from cubridge.interpreter.numerics import round_to_bf16
from cubridge.interpreter.reference import accumulation_bound, kernel_precision, masked_scores
from cubridge.interpreter.shapes import (
    MAX_SCORE_RANGE,
    VERIFY_NUM_SMS,
    critical_lengths,
    default_shapes,
    score_range,
    tile_aligned_case,
)
from cubridge.interpreter.verify import FLOORS, OutputError, random_inputs
from cubridge.passes.transfer import transfer_kernel

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "examples" / "specs"
MUTATION_SPECS = ROOT / "tests" / "mutation" / "specs"


def _spec(path: Path):
    return load_spec(str(path))


def test_lengths_straddle_spec_constants_and_tile_edges(example):
    kernel = find_kernel(example("attention_sm90.mlir"))
    lengths = critical_lengths(kernel, _spec(MUTATION_SPECS / "prefix_lm400.py"))
    for edge in (64, 128, 256, 384, 400):
        assert {edge - 1, edge, edge + 1} <= set(lengths)
    assert max(lengths) == 401


def test_each_length_is_sq_once_and_skv_once_with_gqa_and_batches(example):
    kernel = find_kernel(example("attention_sm80.mlir"))
    shapes = default_shapes(kernel, StandardAttention(), 128)
    lengths = critical_lengths(kernel, StandardAttention())
    assert Counter(s.seqlen_q for s in shapes) == Counter(lengths) == Counter(s.seqlen_kv for s in shapes)
    assert any(s.seqlen_q < s.seqlen_kv for s in shapes) and any(s.seqlen_q > s.seqlen_kv for s in shapes)
    assert any(s.batch > 1 for s in shapes)
    assert any(s.heads_q > s.heads_kv for s in shapes) and any(s.heads_q == s.heads_kv for s in shapes)


def test_persistent_programs_run_several_tiles_by_default(example):
    plan = KernelPlan(find_kernel(example("attention_sm90.mlir")))
    shapes = default_shapes(plan.kernel, StandardAttention(), 128)
    tiles_per_program = [max(map(len, plan.program_tiles(s, VERIFY_NUM_SMS))) for s in shapes]
    assert min(tiles_per_program) >= 2


def test_lengths_stay_inside_captured_tensors(example, tmp_path):
    spec = tmp_path / "short_documents.py"
    spec.write_text(
        "import torch\n"
        "document_id = torch.arange(200) // 50\n"
        "def mask_mod(b, h, q_idx, kv_idx):\n"
        "    return (document_id[q_idx] == document_id[kv_idx]) & (q_idx - kv_idx < 30)\n"
    )
    shapes = default_shapes(find_kernel(example("attention_sm90.mlir")), _spec(spec), 128)
    assert shapes and max(max(s.seqlen_q, s.seqlen_kv) for s in shapes) <= 200
    assert {29, 30, 31} <= {s.seqlen_q for s in shapes}


@pytest.mark.parametrize("program", ["sm90", "sm80"])
def test_block_list_kernels_get_shapes_with_full_and_partial_tiles(example, program):
    """On Hopper's 128-row tiles the critical lengths of document_mask (up to 257) hold no tile inside one
    document, so no full tile: a kernel that never visited its full tiles verified. A longer square shape now
    lists some (tests/mutation: "block lists' full tiles never visited")."""
    kernel = find_kernel(example(f"attention_{program}.mlir"))
    spec = _spec(SPECS / "document_mask.py")
    transfer_kernel(kernel, spec)
    shapes = default_shapes(kernel, spec, 128)
    lists = [block_list_tables(spec, kernel, shape) for shape in shapes]
    assert any(tables["full_kv_num_blocks"].any() for tables in lists)
    assert any(tables["kv_num_blocks"].any() for tables in lists)
    if kernel.skip_empty is not None:  # and a program claims past an empty work tile
        assert any(not counts.all() and counts.any() for counts in
                   ((t["kv_num_blocks"] + t["full_kv_num_blocks"]).numpy() for t in lists))


def test_block_list_kernels_get_a_work_tile_that_starts_on_a_full_tile(example, tmp_path):
    """Its first, peeled step then runs mask-free. Here only document 2 starts on a tile edge (row 512), so only
    its query tiles, past the critical lengths (up to 257), keep no partial kv tile."""
    spec_path = tmp_path / "aligned_document.py"
    spec_path.write_text("import torch\n"
                         "document_id = torch.repeat_interleave(torch.arange(3), torch.tensor([50, 462, 256]))\n"
                         "def mask_mod(b, h, q_idx, kv_idx):\n"
                         "    return document_id[q_idx] == document_id[kv_idx]\n")
    kernel, spec = find_kernel(example("attention_sm90.mlir")), _spec(spec_path)
    transfer_kernel(kernel, spec)
    lists = [block_list_tables(spec, kernel, shape) for shape in default_shapes(kernel, spec, 128)]
    assert any(((t["kv_num_blocks"] == 0) & (t["full_kv_num_blocks"] > 0)).any() for t in lists)
    assert max(critical_lengths(kernel, spec)) < 512


@pytest.mark.parametrize("program", ["sm90", "sm80"])
def test_tile_aligned_captures_start_a_work_tile_on_a_full_tile_past_the_first(example, program):
    """document_mask's own documents start no work tile on a full kv tile past kv tile 0 at any length; with each
    document id replaced by the one at the start of its 128-index block (a multiple of the kv tile width that
    holds a query tile), document 1 (from index 128) does. The runs on it are the verifier's own."""
    kernel, spec = find_kernel(example(f"attention_{program}.mlir")), _spec(SPECS / "document_mask.py")
    transfer_kernel(kernel, spec)
    aligned, shape = tile_aligned_case(kernel, spec, 128)
    document_id = spec.captures["document_id"]
    assert aligned.captures["document_id"].tolist() == [document_id[i // 128 * 128].item() for i in range(512)]
    tables = block_list_tables(aligned, kernel, shape)
    starts = (tables["kv_num_blocks"] == 0) & (tables["full_kv_num_blocks"] > 0)
    assert (tables["full_kv_indices"][..., 0][starts] > 0).any()
    result = verify(_transferred(example, program, spec), spec)
    assert result.ok and result.runs[-1].captures == "tile-aligned" and result.runs[-1].shape == shape


def _transferred(example, program, spec):
    module = example(f"attention_{program}.mlir")
    transfer_kernel(find_kernel(module), spec)
    return module


def test_no_tile_aligned_case_without_captured_tensors_or_block_lists(example):
    kernel = find_kernel(example("attention_sm90.mlir"))
    assert tile_aligned_case(kernel, StandardAttention(), 128) is None
    assert tile_aligned_case(kernel, _spec(SPECS / "alibi.py"), 128) is None  # captured slopes, no block lists


def _transferred_spec(example, tmp_path, source: str):
    spec_path = tmp_path / "spec.py"
    spec_path.write_text(source)
    spec = _spec(spec_path)
    module = example("attention_sm90.mlir")
    transfer_kernel(find_kernel(module), spec)
    return module, spec, spec_path


def test_a_short_captured_tensor_limits_the_default_shapes_with_a_located_note(example, tmp_path):
    """The shapes past a captured tensor were left out silently; now a note says how far verification went and
    why, and a square shape at that length runs."""
    module, spec, spec_path = _transferred_spec(example, tmp_path, "import torch\nbias = torch.linspace(0, 1, 100)\n"
                                                "def score_mod(score, b, h, q_idx, kv_idx):\n"
                                                "    return score + bias[kv_idx]\n")
    result = verify(module, spec)
    assert result.ok, result.summary()
    (note,) = result.notes
    assert note.startswith("the captured tensors are read out of range past length 100, so longer shapes are not "
                           f"verified (nor launched): {spec_path}:4: error: captured tensor 'bias' has 100 entries")
    assert ProblemShape(2, 2, 1, 100, 100, 128) in result.shapes()


def test_no_default_shape_fitting_is_a_located_error_with_the_reason(example, tmp_path):
    module, spec, spec_path = _transferred_spec(example, tmp_path, "import torch\ntable = torch.zeros(64)\n"
                                                "def score_mod(score, b, h, q_idx, kv_idx):\n"
                                                "    return score + table[kv_idx + 1000]\n")
    with pytest.raises(CuBridgeError) as error:
        verify(module, spec)
    assert str(error.value).startswith(f"{spec_path}:4: error: no default shape fits the spec's captured tensors: "
                                       "captured tensor 'table' has 64 entries")


@pytest.mark.parametrize("source", [
    "def mask_mod(b, h, q_idx, kv_idx):\n    return True\n",  # a Python bool: vmap took only tensors
    "import torch\nbias = torch.nn.Parameter(torch.zeros(512))\n"  # a result that requires grad
    "def score_mod(score, b, h, q_idx, kv_idx):\n    return score + bias[kv_idx]\n",
], ids=["python bool", "parameter"])
def test_hooks_returning_python_values_or_reading_parameters_verify(example, tmp_path, source):
    module, spec, _ = _transferred_spec(example, tmp_path, source)
    assert verify(module, spec, shapes=[(1, 2, 1, 130, 130, 128)]).ok


def test_a_bias_table_verifies_on_rows_whose_scores_cancel_large_terms(example, tmp_path):
    """A T5-style table read at clamped distances: its index constants widen the query rows 768 times, and a
    sunk row's score (about -137) then cancels terms summing to thousands. The executor's float32 GEMM and
    numpy's sum those in different orders, 12 ulps of the score apart, which failed the correct kernel while
    the yardstick was numpy's order alone; its scores moved by the accumulation bound now set it."""
    module, spec, _ = _transferred_spec(example, tmp_path, (
        "import torch\nbias = torch.randn(16, 513, generator=torch.Generator().manual_seed(0))\n"
        "def score_mod(score, b, h, q_idx, kv_idx):\n"
        "    return score + bias[h, torch.clamp(kv_idx - q_idx, -256, 256) + 256]\n"))
    assert score_range(spec) == 768.0
    result = verify(module, spec, shapes=[(1, 3, 1, 2, 3, 128)], seeds=(1,), schedules=1)
    assert result.ok, result.summary()
    lse = next(error for error in result.runs[0].errors if error.name == "lse")
    assert lse.max_abs > FLOORS["f32"] * 130  # past the floor: the moved emulations carry it


def test_the_accumulation_bound_covers_other_summation_orders():
    """Sums of a dot product in float32, forward, backward and by 16-term k-slices (a tensor core's), stay
    within `accumulation_bound` of the exact one, for ordinary rows and for one that cancels large terms."""
    rng = np.random.default_rng(0)
    q = round_to_bf16(rng.standard_normal((1, 1, 2, 128)) * np.array([1.0, 700.0])[:, None]).astype(np.float32)
    q[0, 0, 1, 1] = round_to_bf16(np.float32(-200 * math.sqrt(128)))
    k = round_to_bf16(rng.standard_normal((1, 1, 64, 128))).astype(np.float32)
    k[..., 1] = 1.0
    scale = 1 / math.sqrt(128)
    exact = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * scale
    bound = accumulation_bound(q, k, scale)
    products = q[:, :, :, None, :] * k[:, :, None, :, :]  # exact in float32: 16-bit inputs

    def summed(order):
        total = np.zeros(products.shape[:-1], dtype=np.float32)
        for part in order:
            total = (total + products[..., part].sum(axis=-1, dtype=np.float32)).astype(np.float32)
        return total * np.float32(scale)

    for order in ([[i] for i in range(128)], [[i] for i in reversed(range(128))],
                  [list(range(s, s + 16)) for s in range(0, 128, 16)]):
        assert (np.abs(summed(order) - exact) <= bound).all()
    assert bound[0, 0, 1].min() > 100 * bound[0, 0, 0].max()  # the bound follows the terms, not the score


def test_wide_inputs_reach_past_the_score_constants(example):
    spec = _spec(MUTATION_SPECS / "softcap30.py")
    assert score_range(spec) == 90.0
    assert score_range(_spec(SPECS / "sigmoid.py")) == pytest.approx(3 * math.log(256.0))
    assert score_range(_spec(MUTATION_SPECS / "masked_rows.py")) == 9.0  # q_idx % 3; -inf is no range
    plan = KernelPlan(find_kernel(example("attention_sm90.mlir")))
    shape = ProblemShape(1, 2, 1, 200, 200, 128)
    normal, wide = (random_inputs(plan, shape, seed, score_range(spec)) for seed in (0, 1))
    for inputs, widest_score in ((normal, 8.0), (wide, 60.0)):
        scores = masked_scores(StandardAttention(), inputs["q"], inputs["k"], 1 / math.sqrt(128), np.float64)
        assert (np.abs(scores).max() > widest_score) == (inputs is wide)
        assert (inputs["v"][..., 0] == 1).all()


def test_a_sentinel_constant_widens_scores_only_as_far_as_float32_holds(example, tmp_path):
    """finfo.min in a score_mod is a sentinel, not a bound to cross: the wide inputs stop at 2^40 (3 finfo.min
    would make the widened queries infinite), and rows of nothing but it are fully masked in both the reference
    and the kernel-precision emulation (FlexAttention's kernels take it to -inf in base 2)."""
    path = tmp_path / "lowest.py"
    path.write_text("import torch\n\ndef score_mod(score, b, h, q_idx, kv_idx):\n"
                    "    return torch.where(kv_idx < q_idx, score, torch.finfo(torch.float32).min)\n")
    spec = _spec(path)
    assert score_range(spec) == MAX_SCORE_RANGE
    plan = KernelPlan(find_kernel(example("attention_sm90.mlir")))
    inputs = random_inputs(plan, ProblemShape(1, 2, 1, 5, 5, 128), 1, score_range(spec))
    assert all(np.isfinite(inputs[name]).all() for name in ("q", "k", "v"))
    q, k, v = (inputs[name].astype(np.float64) for name in ("q", "k", "v"))
    emulated = kernel_precision(spec, q, k, v, 0.1, round_to_bf16, round_to_bf16)
    for out, lse in ((np.asarray(spec.reference(q, k, v, 0.1)), np.asarray(spec.reference_lse(q, k, v, 0.1))),
                     (emulated["o"], emulated["lse"])):
        assert (out[:, :, 0] == 0).all() and np.isneginf(lse[:, :, 0]).all()
        assert np.isfinite(out).all() and np.isfinite(lse[:, :, 1:]).all()


def test_fully_masked_rows_give_zero_output_and_minus_infinite_lse():
    spec = _spec(MUTATION_SPECS / "masked_rows.py")
    rng = np.random.default_rng(0)
    q, k, v = (round_to_bf16(rng.standard_normal((1, 2, 7, 128))) for _ in range(3))
    reference = np.asarray(spec.reference(q, k, v, 0.1))
    lse = np.asarray(spec.reference_lse(q, k, v, 0.1))
    emulated = kernel_precision(spec, q, k, v, 0.1, round_to_bf16, round_to_bf16)
    masked = np.arange(7) % 3 == 1
    for out in (reference, emulated["o"]):
        assert not np.isnan(out).any()
        assert (out[:, :, masked] == 0).all() and (out[:, :, ~masked] != 0).all()
    for row_lse in (lse, emulated["lse"]):
        assert np.isneginf(row_lse[:, :, masked]).all() and np.isfinite(row_lse[:, :, ~masked]).all()


def test_kernel_error_is_within_twice_the_emulated_error(example):
    """The yardstick is the same computation in bf16/fp32; the Hopper kernel's error
    is of its size, and P rounded to bf16 is what makes it nonzero."""
    plan = KernelPlan(find_kernel(example("attention_sm90.mlir")))
    shape = ProblemShape(1, 2, 1, 300, 300, 128)
    inputs = random_inputs(plan, shape, seed=0)
    scale = 1 / math.sqrt(128)
    run = execute(plan, shape, inputs, scale, num_sms=2)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    reference = StandardAttention().reference(q, k, v, scale)
    exact_p = kernel_precision(StandardAttention(), q, k, v, scale, np.float32, np.asarray)
    emulated = kernel_precision(StandardAttention(), q, k, v, scale, round_to_bf16, round_to_bf16)
    kernel_error = np.abs(run.outputs["o"] - reference).max()
    emulated_error = np.abs(emulated["o"] - reference).max()
    assert np.abs(exact_p["o"] - reference).max() < emulated_error / 10
    assert emulated_error / 2 < kernel_error <= 2 * emulated_error


def test_a_bound_that_is_not_finite_fails():
    assert OutputError("o", 0.0, 1.0, 0.0, 1.0).ok
    assert not OutputError("o", 0.0, math.inf, 0.0, 1.0).ok
    assert not OutputError("o", 2.0, 1.0, 0.0, 1.0).ok


def test_integer_thresholds_of_score_mod_widen_the_scores(tmp_path):
    spec = tmp_path / "threshold.py"
    spec.write_text(
        "import torch\n"
        "def score_mod(score, b, h, q_idx, kv_idx):\n"
        "    return torch.where(score > 20, score, score / 2)\n"
    )
    assert score_range(_spec(spec)) == 60.0


def test_no_default_shape_fitting_the_captures_is_an_error(example, tmp_path):
    spec = tmp_path / "one_head.py"
    spec.write_text(
        "import torch\n"
        "bias = torch.zeros(1)\n"
        "def score_mod(score, b, h, q_idx, kv_idx):\n"
        "    return score + bias[h]\n"
    )
    with pytest.raises(CuBridgeError, match="no default shape fits the spec's captured tensors"):
        verify(example("attention_sm90.mlir"), _spec(spec))
