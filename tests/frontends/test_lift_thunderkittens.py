"""ThunderKittens' Hopper attention kernel (`fwd_attend_ker<D, is_causal>` of
`../shared/thirdparty/thunderkittens/kernels/attention/mha_h100/mha_h100.cu`, read unmodified from there)
lifts through the ThunderKittens profile, and the lifted IR verifies in the executor on the shapes the
kernel supports: SQ = SKV (its one length N), a multiple of its 192-row query tiles and 128-row kv tiles."""

from pathlib import Path

import pytest

from cubridge.dialect.cuir import CopyAsyncOp, ForEachTileOp, GemmAsyncOp, KernelOp, StoreAsyncOp
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.profile import load_profile
from cubridge.frontends.cuda.program import load_program
from cubridge.interpreter.verify import verify

ROOT = Path(__file__).resolve().parents[2]
THUNDERKITTENS = ROOT.parent / "shared" / "thirdparty" / "thunderkittens"
KERNEL = THUNDERKITTENS / "kernels" / "attention" / "mha_h100" / "mha_h100.cu"

pytestmark = pytest.mark.skipif(not KERNEL.is_file(), reason=f"ThunderKittens is not at {THUNDERKITTENS} "
                                                              "(the third-party input these tests lift)")


def _lift(entry: str):
    return lift_cuda_file(KERNEL, entry, "thunderkittens")


def test_template_instances_are_the_entry_points():
    """A template kernel's entry points are the instances the file launches, named as written less blanks."""
    entries = [entry.name for entry in load_program(KERNEL, ()).entry_points()]
    forward = [name for name in entries if name.startswith("fwd_attend_ker<")]
    assert sorted(forward) == ["fwd_attend_ker<128,false>", "fwd_attend_ker<128,true>",
                               "fwd_attend_ker<64,false>", "fwd_attend_ker<64,true>"]


def test_lifted_structure():
    """Roles from the register-budget calls, one work tile per program (blockIdx), shared tiles from the
    allocator, semaphores with their CUDA counts over one issuer per warp group, TMA by tile coordinates."""
    result = _lift("fwd_attend_ker<128, false>")
    assert result.entry == "fwd_attend_ker<128,false>"
    kernel = next(op for op in result.module.walk() if isinstance(op, KernelOp))
    assert kernel.sym_name.data == "fwd_attend_ker_128_false"
    assert [n.data for n in kernel.arg_names.data] == ["q", "k", "v", "o"]
    assert (kernel.tile_m.value.data, kernel.schedule.data, kernel.threads.value.data) == (192, "grid", 512)
    workers = {w.sym_name.data: (w.thread_range, w.regs.value.data) for w in kernel.workers}
    assert workers == {"producer": ((384, 512), 32), "consumer": ((0, 384), 160)}
    assert all(any(isinstance(op, ForEachTileOp) for op in w.body.block.ops) for w in kernel.workers)
    copies = [op for op in kernel.walk() if isinstance(op, CopyAsyncOp)]
    assert sorted({op.dest.name_hint for op in copies}) == ["k_smem", "q_smem", "v_smem"]
    gemms = [op for op in kernel.walk() if isinstance(op, GemmAsyncOp)]
    assert [g.layout.data for g in gemms] == ["abt", "ab"]
    assert len([op for op in kernel.walk() if isinstance(op, StoreAsyncOp)]) == 1


def test_omitted_lse_is_said():
    """The LSE output `l` (the backward pass's -sqrt(D) * lse through a shared vector) is left out by the
    profile's [omit], and the lift says which calls that removed."""
    note = _lift("fwd_attend_ker<128, false>").note
    assert note.startswith("note: left out by the profile's [omit] (`l`: ")
    assert note.endswith("warpgroup::store at mha_h100.cu:223:9, warp::tma::store_async at mha_h100.cu:228:13")


def _causal_spec():
    from cubridge.frontends.spec import load_spec

    return load_spec(ROOT / "examples" / "specs" / "causal.py")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 2, 1, 384, 384, 128), (2, 4, 2, 768, 768, 128), (1, 2, 1, 384, 384, 64)])
def test_instance_verifies(shape, causal):
    """Full and causal, D = 128 at one and two 384-row blocks (GQA), D = 64 at 384 rows."""
    module = _lift(f"fwd_attend_ker<{shape[-1]}, {str(causal).lower()}>").module
    result = verify(module, spec=_causal_spec() if causal else None, shapes=[shape], seeds=(0, 1), schedules=2)
    assert result.ok, result.summary()


@pytest.mark.parametrize("causal", [False, True])
def test_d64_skips_mbarrier_phases_from_768_rows(causal):
    """D = 64 preloads three of its four kv stages, so from the fifth kv tile on (768 rows) its producer's
    first wait on stage 0 is for phase 1. That is safe on the GPU (its wait on stage 3's phase 0 already
    orders it), but the executor requires every instance to wait for every phase of an mbarrier in order
    (lit_tests/cuir-run/race_skipped_phase.mlir) and reports the skip."""
    module = _lift(f"fwd_attend_ker<64, {str(causal).lower()}>").module
    result = verify(module, spec=_causal_spec() if causal else None, shapes=[(1, 2, 1, 768, 768, 64)],
                    seeds=(0,), schedules=1)
    assert result.verdict == "race"
    assert [d.category for d in result.diagnostics] == ["wrong phase"]
    assert "of %compute_done[0] (parity 1), skipping phase 0, which it never waited for" in \
        result.diagnostics[0].message


def test_causal_mask_is_one_map_of_block_positions():
    """The masking of the last two kv tiles, a `for (; k_blk == a || k_blk == b; k_blk += 10000)` loop (a
    branch: a - b = 8 is no multiple of 10000) over 16x16 base tiles with neg_infty / make_causal per
    block, is an scf.if around one cuir.map of the element's row and column blocks."""
    from cubridge.dialect.cuir import MapOp

    kernel = next(op for op in _lift("fwd_attend_ker<128, true>").module.walk() if isinstance(op, KernelOp))
    masks = [op for op in kernel.walk() if isinstance(op, MapOp) and op.parent_op().name == "scf.if"]
    assert len(masks) == 1
    body = [op.name for op in masks[0].body.block.ops]
    assert body.count("arith.select") == 3 and body.count("arith.divsi") == 2 and body.count("arith.remsi") == 2


def test_a_kernel_change_reaches_the_lifted_ir(tmp_path):
    """The consumers' release of a kv stage dropped from the CUDA: the lifted program deadlocks."""
    source = KERNEL.read_text()
    release = "if(warpgroup::laneid() == 0) arrive(compute_done[(kv_idx)%K::stages], 1);"
    assert source.count(release) == 1
    broken = tmp_path / "mha_h100.cu"
    broken.write_text(source.replace(release, ""))
    module = lift_cuda_file(broken, "fwd_attend_ker<128,false>", "thunderkittens").module
    result = verify(module, shapes=[(1, 2, 1, 768, 768, 128)], seeds=(0,), schedules=1)
    assert result.verdict == "deadlock", result.summary()


def test_profile_rows_name_their_ops():
    profile = load_profile("thunderkittens")
    assert profile.primitive("warpgroup::mm_ABt") == ("cuir.gemm_async", ["acc", "a", "b"])
    assert profile.entry("warp::row_max")["reduce"] == "max"
    assert profile.entry("mbarrier_wait") is None
