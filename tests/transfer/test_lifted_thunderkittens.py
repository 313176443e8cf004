"""The transfer on ThunderKittens' lifted Hopper kernel (`fwd_attend_ker<D, false>` of
`../shared/thirdparty/thunderkittens/kernels/attention/mha_h100/mha_h100.cu`, through the ThunderKittens
profile): masks and a score_mod verify in the executor on the shapes the kernel supports (SQ = SKV = N, a
multiple of its 192-row query tiles and 128-row kv tiles; D = 64 at N = 384 only, docs/lifting-profiles.md).

What differs from the project's kernels: its row max reduces the Q K^T tile itself (the transfer puts a score
map there), its scale is a constant in the maps of its softmax (1/sqrt(D) * log2 e), it computes the
probabilities twice (`+ 0.f` for the P V gemm), and its loops run to the kv tile count N / 128 (plus a constant)
from constant starts, with its stages and phases derived from the index: they keep counting from there, and the
kv rows become those of the visited tiles."""


import pytest
from xdsl.dialects import arith

from cubridge.dialect import cuir_context
from cubridge.dialect.cuir import KernelOp, MapOp
from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.passes.transfer import TransferPass

from transfer_helpers import ROOT, spec_path

THUNDERKITTENS = ROOT.parent / "shared" / "thirdparty" / "thunderkittens"
KERNEL = THUNDERKITTENS / "kernels" / "attention" / "mha_h100" / "mha_h100.cu"
SHAPES = {
    128: [ProblemShape(1, 2, 1, 384, 384, 128), ProblemShape(1, 2, 2, 768, 768, 128)],
    64: [ProblemShape(1, 2, 1, 384, 384, 64), ProblemShape(2, 2, 1, 384, 384, 64)],
}

pytestmark = pytest.mark.skipif(not KERNEL.is_file(), reason=f"ThunderKittens is not at {THUNDERKITTENS} "
                                                              "(the third-party input these tests lift)")


def _transferred(head_dim: int, name: str):
    module = lift_cuda_file(KERNEL, f"fwd_attend_ker<{head_dim},false>", "thunderkittens").module
    TransferPass(spec_path(name)).apply(cuir_context(), module)
    return module


@pytest.mark.parametrize("head_dim", [128, 64])
@pytest.mark.parametrize("name", ["prefix_lm", "global_sliding_window", "softcap"])
def test_spec_on_thunderkittens_lift_verifies(name, head_dim):
    """prefix_lm: closed-form kv bounds; global_sliding_window: block lists (two kv intervals per row);
    softcap: a score_mod."""
    result = verify(_transferred(head_dim, name), load_spec(spec_path(name)), shapes=SHAPES[head_dim], schedules=1)
    assert result.ok, result.summary()


def _kernel(module) -> KernelOp:
    return next(op for op in module.walk() if isinstance(op, KernelOp))


def test_score_mod_scales_the_scores_by_the_kernels_constant():
    """The score map (inserted where the row max read the gemm tile) follows a map that multiplies by
    1/sqrt(128); the softmax maps multiply by log2 e instead of 1/sqrt(128) * log2 e."""
    kernel = _kernel(_transferred(128, "softcap"))
    constants = {round(op.value.value.data, 6) for op in kernel.walk()
                 if isinstance(op, arith.ConstantOp) and isinstance(op.parent_op(), MapOp)
                 and op.result.type == op.value.type and op.value.type.name == "f32"}
    assert round(0.08838834764, 6) in constants and round(1.44269504, 6) in constants
    assert round(0.08838834764 * 1.44269504, 6) not in constants


def test_kv_loops_run_over_the_visited_tiles():
    """prefix_lm: both loops run to kv_hi - kv_lo plus their offset (the producer one less: it loads the next
    tile), and their kv rows are those of the visited tiles."""
    kernel = _kernel(_transferred(128, "prefix_lm"))
    loops = [op for op in kernel.walk() if op.name == "scf.for"]
    assert [loop.ub.name_hint for loop in loops] == ["kv_steps", "kv_steps"]
    offsets = [loop.ub.owner.rhs.owner.value.value.data for loop in loops]
    assert sorted(offsets) == [-1, 0]


def test_mask_that_empties_a_rows_first_tile_is_rejected_by_the_executor():
    """The kernel's online softmax has no guard for a row whose running max is still -inf (it is written for
    causal masks, which keep key 0 of every row): a sliding window that drops every key of a row's first visited
    tile makes exp2(-inf + inf), and the executor reports the mismatch."""
    result = verify(_transferred(128, "sliding_window"), load_spec(spec_path("sliding_window")),
                    shapes=SHAPES[128][:1], schedules=1, seeds=(0,))
    assert not result.ok and "mismatch" in result.summary()


def test_activation_is_a_located_error():
    """An activation would replace the probability map; the kernel computes the probabilities twice."""
    with pytest.raises(CuBridgeError) as error:
        _transferred(128, "sigmoid")
    assert str(error.value) == (
        f"{KERNEL}:195:13: error: transfer: a sigmoid normalization replaces the probability map, and this kernel "
        "computes the probabilities twice")
