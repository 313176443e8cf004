"""Small kernels that pin down tile, map and scalar semantics."""

import math

import numpy as np
from example_programs import parse

from cubridge.interpreter import KernelPlan, ProblemShape, execute
from cubridge.interpreter.executor import find_kernel
from cubridge.interpreter.numerics import round_to_bf16

PROBE = """
builtin.module {
  cuir.kernel @probe(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x f32, strided>) threads 128 smem 4096 cluster 1x1x1 tile_m 64 schedule grid {
    %q_smem = cuir.alloc : !cuir.smem<64x32xbf16>
    cuir.worker @w threads 0 to 128 (%index) {
      %c0 = arith.constant 0 : index
      %c3 = arith.constant 3 : index
      %c64 = arith.constant 64 : index
      %minus7 = arith.constant -7 : index
      %neg_inf = arith.constant 0xff800000 : f32
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %row = arith.muli %q_tile, %c64 : index
        cuir.barrier
        cuir.copy %q[%batch, %head, %row, %c0] -> %q_smem : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x32xbf16>
        cuir.barrier
        %x = cuir.load %q_smem : !cuir.smem<64x32xbf16> -> !cuir.tile<64x32xbf16, @w>
        %rows = cuir.fill 1.5 : !cuir.rows<64xf32, @w>
        %cols = cuir.fill 0.25 : !cuir.cols<32xf32, @w>
        %quotient = arith.divsi %minus7, %c3 : index
        %remainder = arith.remsi %minus7, %c3 : index
        %offset = arith.addi %quotient, %remainder : index
        %is_minus3 = arith.cmpi eq, %offset, %minus7 : index
        %shift = scf.if %is_minus3 -> (index) {
          scf.yield %c0 : index
        } else {
          scf.yield %offset : index
        }
        %y = cuir.map %x, %rows, %cols at [%row, %c0] (%a: bf16, %r: f32, %c: f32, %qi: index, %ki: index) {
          %wide = arith.extf %a : bf16 to f32
          %scaled = arith.mulf %wide, %r : f32
          %biased = arith.addf %scaled, %c : f32
          %shift_int = arith.index_cast %shift : index to i64
          %shift_f = arith.sitofp %shift_int : i64 to f32
          %shifted = arith.addf %biased, %shift_f : f32
          %keep = arith.cmpi ult, %ki, %qi : index
          %out = arith.select %keep, %shifted, %neg_inf : f32
          cuir.yield %out : f32
        } : !cuir.tile<64x32xbf16, @w>, !cuir.rows<64xf32, @w>, !cuir.cols<32xf32, @w> -> !cuir.tile<64x32xf32, @w>
        cuir.store %y -> %o[%batch, %head, %row, %c0] : !cuir.tile<64x32xf32, @w> -> !cuir.global<4 x f32, strided>
      }
    }
  }
}
"""


def _run(text: str, shape: ProblemShape):
    plan = KernelPlan(find_kernel(parse(text)))
    rng = np.random.default_rng(0)
    inputs = {
        "q": round_to_bf16(rng.standard_normal((shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim))),
        "k": np.zeros((shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim), np.float32),
        "v": np.zeros((shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim), np.float32),
    }
    return plan, inputs, execute(plan, shape, inputs, 1.0 / math.sqrt(shape.head_dim))


def test_map_broadcasts_vectors_offsets_indices_and_evaluates_scalar_code():
    shape = ProblemShape(2, 3, 3, 100, 7, 32)
    plan, inputs, run = _run(PROBE, shape)
    assert plan.head_dim == 32
    assert not run.log, run.log.diagnostics
    q_idx = np.arange(shape.seqlen_q)[:, None]
    kv_idx = np.arange(shape.head_dim)[None, :]
    expected = np.where(kv_idx < q_idx, inputs["q"] * np.float32(1.5) + np.float32(0.25) - 3, -np.inf)
    np.testing.assert_array_equal(run.outputs["o"], expected.astype(np.float32))


def test_rows_past_the_end_are_zero_filled_on_load_and_clipped_on_store():
    shape = ProblemShape(1, 1, 1, 65, 1, 32)
    _, inputs, run = _run(PROBE, shape)
    assert not run.log
    assert run.outputs["o"].shape == (1, 1, 65, 32)
    assert not np.isnan(run.outputs["o"]).any()
    assert run.outputs["o"][0, 0, 64, 0] == np.float32(inputs["q"][0, 0, 64, 0] * 1.5 + 0.25 - 3)


def test_tiles_follow_the_grid_order():
    plan = KernelPlan(find_kernel(parse(PROBE)))
    shape = ProblemShape(2, 2, 1, 130, 10, 32)
    tiles = [t for (t,) in plan.program_tiles(shape, num_sms=132)]
    assert tiles[:4] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]
    assert len(tiles) == 3 * 2 * 2


def test_persistent_programs_stride_over_longest_first_tiles():
    text = PROBE.replace("schedule grid", "schedule persistent longest_first")
    plan = KernelPlan(find_kernel(parse(text)))
    programs = plan.program_tiles(ProblemShape(1, 2, 1, 192, 10, 32), num_sms=4)
    assert len(programs) == 4
    assert programs[0] == [(2, 0, 0), (0, 0, 0)]
    assert programs[1] == [(2, 1, 0), (0, 1, 0)]
    assert [tile[0] for tiles in programs for tile in tiles].count(2) == 2


def _dynamic_plan(order: str = " longest_first") -> KernelPlan:
    return KernelPlan(find_kernel(parse(PROBE.replace("schedule grid", "schedule dynamic" + order))))


def test_dynamic_programs_claim_tiles_by_the_causal_cost_model():
    # 4 query tiles, longest first, cost q_tile + 1: program 0 runs tile 3 (cost 4), program 1
    # tile 2 (cost 3); program 1 is free first and claims tile 1, then program 0 claims tile 0.
    programs = _dynamic_plan().program_tiles(ProblemShape(1, 1, 1, 256, 10, 32), num_sms=2)
    assert programs == [[(3, 0, 0), (0, 0, 0)], [(2, 0, 0), (1, 0, 0)]]


def test_dynamic_assignment_is_a_partition_that_starts_with_tile_p():
    plan = _dynamic_plan()
    for shape, num_sms in [(ProblemShape(2, 3, 1, 700, 10, 32), 5), (ProblemShape(1, 2, 1, 130, 10, 32), 7)]:
        tiles = plan.work_tiles(shape)
        programs = plan.program_tiles(shape, num_sms)
        assert len(programs) == min(num_sms, len(tiles))
        assert [p[0] for p in programs] == tiles[: len(programs)]
        claimed = [tile for p in programs for tile in p]
        assert sorted(claimed) == sorted(tiles)


def test_dynamic_in_natural_order_claims_the_persistent_stride():
    persistent = KernelPlan(find_kernel(parse(PROBE.replace("schedule grid", "schedule persistent"))))
    shape = ProblemShape(2, 3, 1, 300, 10, 32)
    assert _dynamic_plan("").program_tiles(shape, 4) == persistent.program_tiles(shape, 4)


REWAIT = """
builtin.module {
  cuir.kernel @rewait(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x f32, strided>) threads 128 smem 8192 cluster 1x1x1 tile_m 64 schedule grid {
    %q_smem = cuir.alloc : !cuir.smem<64x64xbf16>
    cuir.worker @w threads 0 to 128 (%index) {
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %row = arith.muli %q_tile, %c64 : index
        cuir.copy %q[%batch, %head, %row, %c0] -> %q_smem : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x64xbf16>
        cuir.fence_async_shared
        cuir.gemm_fence
        %s1, %t1 = cuir.gemm_async abt %q_smem, %q_smem : !cuir.smem<64x64xbf16>, !cuir.smem<64x64xbf16> -> !cuir.tile<64x64xf32, @w>
        cuir.gemm_wait %t1 : !cuir.token<@w>
        %s2, %t2 = cuir.gemm_async abt %q_smem, %q_smem acc %s1 : !cuir.smem<64x64xbf16>, !cuir.smem<64x64xbf16>, !cuir.tile<64x64xf32, @w> -> !cuir.tile<64x64xf32, @w>
        cuir.gemm_wait %t1 : !cuir.token<@w>
        STORE_THEN_WAIT
      }
    }
  }
}
"""
_STORE = "cuir.store %s2 -> %o[%batch, %head, %row, %c0] : !cuir.tile<64x64xf32, @w> -> !cuir.global<4 x f32, strided>"
_WAIT = "cuir.gemm_wait %t2 : !cuir.token<@w>"


def test_waiting_again_on_a_completed_gemm_token_completes_nothing_more():
    """The sm90 kv loop's first step waits on S_0's token a second time: that must be a no-op."""
    shape = ProblemShape(1, 1, 1, 64, 1, 64)
    _, _, early = _run(REWAIT.replace("STORE_THEN_WAIT", f"{_STORE}\n        {_WAIT}"), shape)
    (diagnostic,) = early.log.diagnostics
    assert diagnostic.category == "race"
    assert "reads the result of cuir.gemm_async" in diagnostic.message
    _, inputs, late = _run(REWAIT.replace("STORE_THEN_WAIT", f"{_WAIT}\n        {_STORE}"), shape)
    assert not late.log, late.log.diagnostics
    q = inputs["q"][0, 0].astype(np.float64)
    np.testing.assert_allclose(late.outputs["o"][0, 0], 2 * q @ q.T, rtol=1e-5, atol=1e-4)
