"""The transfer on lifted CUDA: every example spec, transferred onto the lift of the Hopper reference kernel
(`cuir-opt --lift`), verifies by execution, for every dtype and head dim of its full-attention entry points.

The lifted kernel masks only the kv tiles whose `needs_mask(position)` holds and folds the softmax scale into
its exp2; the transfer keeps that fold unless a score_mod or an activation reads the score."""

import re
from functools import cache

import pytest
from xdsl.dialects import arith, scf

from cubridge.dialect import cuir_context
from cubridge.dialect.cuir import CopyAsyncOp, KernelOp, StoreOp
from cubridge.diagnostics import CuBridgeError, parse_module
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.interpreter import ProblemShape, verify
from cubridge.passes.transfer import TransferPass
from cubridge.passes.transfer_match import copy_row, match_attention

from transfer_helpers import KERNELS, ROOT, SPECS, lifted_verification, spec_path

KERNEL = KERNELS / "attention_sm90.cu"
DEFAULT_ENTRY = "attention_sm90_bf16_d128_full"
OTHER_ENTRIES = ("attention_sm90_fp16_d128_full", "attention_sm90_bf16_d64_full", "attention_sm90_fp16_d256_full")
SHAPES = (
    ProblemShape(2, 4, 2, 200, 300, 128),
    ProblemShape(1, 2, 2, 400, 129, 128),
)


@cache
def _lifted_text(entry: str) -> str:
    return str(lift_cuda_file(KERNEL, entry).module)


@pytest.mark.parametrize("name", SPECS)
def test_spec_on_lifted_kernel_verifies(name):
    result = lifted_verification(KERNEL, DEFAULT_ENTRY, name, SHAPES)
    assert result.ok, result.summary()


@pytest.mark.parametrize("entry", OTHER_ENTRIES)
@pytest.mark.parametrize("name", ["causal", "softcap", "document_mask", "sigmoid"])
def test_spec_on_other_instances_verifies(entry, name):
    result = lifted_verification(KERNEL, entry, name, SHAPES)
    assert result.ok, result.summary()


def _transfer_matched(name: str):
    """The transferred default lift, its kernel, and the probability maps matched before the transfer."""
    module = lift_cuda_file(KERNEL, DEFAULT_ENTRY).module
    kernel = next(op for op in module.walk() if isinstance(op, KernelOp))
    probabilities = [site.probabilities for site in match_attention(kernel).sites]
    TransferPass(spec_path(name)).apply(cuir_context(), module)
    return kernel, probabilities


def _exp2_multipliers(probabilities) -> set[str]:
    """What the probability maps multiply a score by before exp2: the multiplier's defining op."""
    found = set()
    for op in probabilities:
        element = op.body.block.args[0]
        found |= {
            (inner.rhs if inner.lhs is element else inner.lhs).owner.name
            for inner in op.body.block.ops
            if isinstance(inner, arith.MulfOp) and element in inner.operands
        }
    return found


def _lse_multiplies_by_scale(kernel) -> bool:
    scale = kernel.body.block.args[-1]
    lse_map = next(op.value.owner for op in kernel.walk() if isinstance(op, StoreOp) and op.dest.type.rank.data == 3)
    return any(isinstance(op, arith.MulfOp) and scale in op.operands for op in lse_map.body.block.ops)


def test_mask_keeps_the_exp2_fold():
    """A mask reads no score: the row max stays one of unscaled scores, the exp2 multiplies by scale * log2 e
    (a product), the LSE scales the row max."""
    kernel, probabilities = _transfer_matched("causal")
    assert _exp2_multipliers(probabilities) == {"arith.mulf"}
    assert _lse_multiplies_by_scale(kernel)


def test_score_mod_reads_scaled_scores():
    """A score_mod reads the scaled score: a map scales the scores before it, the exp2 multiplies by log2 e
    alone (a constant) and the LSE takes the row max as it is."""
    kernel, probabilities = _transfer_matched("softcap")
    assert _exp2_multipliers(probabilities) == {"arith.constant"}
    assert not _lse_multiplies_by_scale(kernel)
    scale = kernel.body.block.args[-1]
    scaling = [op for op in kernel.walk() if isinstance(op, arith.MulfOp) and scale in op.operands]
    assert len(scaling) == 2  # in the score maps of the first kv tile and of the kv loop


def test_lifted_kernel_is_unchanged_by_matching():
    """Matching alone changes nothing (the transfer's analysis has no side effects)."""
    module = lift_cuda_file(KERNEL, DEFAULT_ENTRY).module
    match_attention(next(op for op in module.walk() if isinstance(op, KernelOp)))
    assert str(module) == _lifted_text(DEFAULT_ENTRY)


def _printed_lift(text_change):
    path = ROOT / "examples" / "ir" / "attention_sm90.mlir"
    text = text_change(path.read_text())
    context = cuir_context()
    return context, parse_module(context, text, str(path)), text


def test_lifted_kernel_without_a_scale_is_a_located_error():
    """Neither the score map scales the score nor the exp2 map folds a scale: the first masked score map is
    named."""
    def unscaled_first_exp2_map(text):
        # the exp2 map's multiply is the one an add of the row offset follows
        text, count = re.subn(r"(%\d+) = arith.mulf (%\d+), %scale_log2 : f32(\n\s+%\d+ = arith.addf \1,)",
                              r"\1 = arith.mulf \2, \2 : f32\3", text, count=1)
        assert count == 1
        return text

    context, module, text = _printed_lift(unscaled_first_exp2_map)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "%s_2 = cuir.map %s at" in l)
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(context, module)
    assert str(error.value) == (
        f"{ROOT}/examples/ir/attention_sm90.mlir:{line}:11: error: transfer: the score map does not multiply "
        "the score by a scale from outside the map, and the probability map folds none into its exp2")


def test_mask_branch_of_other_values_is_a_located_error():
    """An scf.if before the row max whose else-branch yields something other than the masked map's input."""
    context, module, text = _printed_lift(
        lambda text: text.replace("} else {\n          scf.yield %s : ", "} else {\n          scf.yield %o_1 : ", 1)
        .replace("%s_1 = scf.if %needs_mask", "%o_1 = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>\n"
                 "        %s_1 = scf.if %needs_mask", 1)
        .replace("        %o_1 = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>\n        %probs", "        %probs", 1))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "%s_1 = scf.if %needs_mask" in l)
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(context, module)
    assert str(error.value) == (
        f"{ROOT}/examples/ir/attention_sm90.mlir:{line}:9: error: transfer: the row max reduces an scf.if "
        "that does not choose between a map of the score tile (masked) and the tile itself")


D64_ENTRY = "attention_sm90_bf16_d64_full"


def _v_loads(module) -> tuple[CopyAsyncOp, CopyAsyncOp, scf.ForOp]:
    """The D = 64 producer's V loads, which trail K by one kv step: the one in the kv loop (the previous step's
    row) and the one after it (the last step's row, a result of the loop); and the loop."""
    in_loop, after = (op for op in module.walk() if isinstance(op, CopyAsyncOp) and op.source.name_hint == "v")
    return in_loop, after, after.source_indices[2].owner


def test_v_loaded_a_step_behind_k_follows_the_transferred_bounds():
    """At D = 64 the lift loads V_{j-1} after K_j and V of the last step after the loop: the transfer moves the
    loop's bounds and leaves the trailing row to the loop, and a sparse mask's block lists verify (the loads read
    the visited tiles, not tile indices)."""
    module = lift_cuda_file(KERNEL, D64_ENTRY).module
    in_loop, after, loop = _v_loads(module)
    assert isinstance(loop, scf.ForOp) and in_loop.source_indices[2].owner is loop.body.block
    for name in ("sliding_window", "interleaved_documents"):
        result = lifted_verification(KERNEL, D64_ENTRY, name, SHAPES)
        assert result.ok, result.summary()


def test_v_load_after_the_loop_of_a_row_ahead_is_a_located_error():
    """A V load after the kv loop that reads the row the loop carries into a next step, not its last step's."""
    module = lift_cuda_file(KERNEL, D64_ENTRY).module
    _, after, loop = _v_loads(module)
    next_row = loop.results[0]
    assert next_row.name_hint == "kv_row_end"
    copy_row(after).set(next_row)
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(cuir_context(), module)
    assert str(error.value).startswith(f"{KERNEL}:")
    assert str(error.value).endswith(
        "error: transfer: a K or V load after the kv loop must read a kv row the loop carries from its last step")


def test_v_load_of_k_row_fails_verification():
    """V_{j-1} loaded from K_j's row in the kv loop (a wrong trailing row): the default verifier rejects it."""
    module = lift_cuda_file(KERNEL, D64_ENTRY).module
    in_loop, _, loop = _v_loads(module)
    k_row = loop.body.block.args[1]
    assert k_row.name_hint == "kv_row"
    copy_row(in_loop).set(k_row)
    assert not verify(module).ok
