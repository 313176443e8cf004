"""The transfer on the lifted Ampere reference kernel (`cuir-opt --lift attention_sm80.cu`): every example spec,
transferred onto the lift, verifies by execution.

Beside what the lifted Hopper kernel has (a mask branch on `needs_mask(position)`, the scale folded into exp2),
the Ampere lift starts its kv loop at tile 0, so that its mask test `j < full_begin` compares the index with the
lower bound; it prefetches the next K and V tiles under `j + 1 < end` into the stage `j rem 2`, and carries a
running max that a row map makes of each tile's row max."""


import pytest
from xdsl.dialects import arith

from cubridge.dialect import cuir_context
from cubridge.dialect.cuir import CopyAsyncOp, KernelOp
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.passes.transfer import TransferPass
from cubridge.passes.transfer_match import match_attention

from transfer_helpers import KERNELS, SPECS, lifted_transferred, lifted_verification

KERNEL = KERNELS / "attention_sm80.cu"
ENTRY = "attention_sm80_bf16_d128_full"  # the instance examples/ir/attention_sm80.mlir describes
OTHER_ENTRIES = ("attention_sm80_bf16_d64_full", "attention_sm80_fp16_d128_full")
SHAPES = (
    ProblemShape(2, 4, 2, 200, 300, 128),
    ProblemShape(1, 2, 2, 400, 129, 128),
)


@pytest.mark.parametrize("name", SPECS)
def test_spec_on_lifted_sm80_verifies(name):
    result = lifted_verification(KERNEL, ENTRY, name, SHAPES)
    assert result.ok, result.summary()


@pytest.mark.parametrize("entry", OTHER_ENTRIES)
@pytest.mark.parametrize("name", ["sliding_window", "softcap", "document_mask", "sigmoid"])
def test_spec_on_other_sm80_instances_verifies(entry, name):
    result = lifted_verification(KERNEL, entry, name, SHAPES)
    assert result.ok, result.summary()


def _kernel(module) -> KernelOp:
    return next(op for op in module.walk() if isinstance(op, KernelOp))


def test_match_finds_the_pipeline_of_the_lift():
    """One kv loop; the prologue's K and V loads at kv tile 0; `j + 1 < end` and `j rem 2` in the loop; the mask
    test's `j < 0` is no step test; the LSE's `max * scale` of the running max."""
    found = match_attention(_kernel(lift_cuda_file(KERNEL, ENTRY).module))
    assert len(found.kv_loops) == 1
    assert sorted(ref.op.source.name_hint for ref in found.first_kv_rows) == ["k", "v"]
    assert [ref.op.name for ref in found.end_tests] == ["arith.cmpi"]
    assert [ref.op.name for ref in found.step_counts] == ["arith.remsi"]
    assert not found.step_tests
    assert len(found.lse_scales) == 1


def test_window_starts_its_loop_and_its_stages_at_the_first_visited_tile():
    """A sliding window skips the first tiles of late query tiles: the prologue loads the first visited tile
    into stage 0, the loop's stage counts steps from kv_lo, and the prefetch stops at kv_hi."""
    kernel = _kernel(lifted_transferred(KERNEL, ENTRY, "sliding_window"))
    prologue = [op for op in kernel.walk() if isinstance(op, CopyAsyncOp) and op.source.name_hint in ("k", "v")
                and op.parent_op().name == "cuir.for_each_tile"]
    assert {op.source_indices[2].name_hint for op in prologue} == {"first_kv_row"}
    loop = next(op for op in kernel.walk() if op.name == "scf.for")
    assert loop.lb.name_hint == "kv_lo" and loop.ub.name_hint == "kv_hi"
    stage = next(op for op in loop.body.block.ops if isinstance(op, arith.RemSIOp))
    assert isinstance(stage.lhs.owner, arith.SubiOp)
    assert tuple(stage.lhs.owner.operands) == (loop.body.block.args[0], loop.lb)
    has_next = next(op for op in loop.body.block.ops if isinstance(op, arith.CmpiOp) and loop.ub in op.operands)
    assert has_next.rhs is loop.ub


WINDOW_50 = '''
def mask_mod(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 50)
'''


def test_window_from_an_odd_tile_verifies_and_needs_its_stage_count(tmp_path):
    """A 50-key window starts query tile t at kv tile 2t - 1: with the stage `j rem 2` instead of
    `(j - kv_lo) rem 2`, the first prefetch would overwrite the stage the prologue is still loading."""
    spec = tmp_path / "window_50.py"
    spec.write_text(WINDOW_50)
    module = lift_cuda_file(KERNEL, ENTRY).module
    TransferPass(str(spec)).apply(cuir_context(), module)
    shapes = [ProblemShape(1, 2, 1, 300, 300, 128)]
    assert verify(module, load_spec(str(spec)), shapes=shapes, schedules=1).ok
    loop = next(op for op in _kernel(module).walk() if op.name == "scf.for")
    stage = next(op for op in loop.body.block.ops if isinstance(op, arith.RemSIOp))
    stage.operands[0] = loop.body.block.args[0]
    result = verify(module, load_spec(str(spec)), shapes=shapes, schedules=1)
    assert not result.ok and "race" in result.summary()
