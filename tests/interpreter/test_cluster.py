"""Clusters: the programs of a cluster run together, reach each other's mbarriers and shared memory, and the
executor reports what a pair protocol gets wrong.

PAIRS is a small kernel of two-CTA clusters in the shape of the Hopper kernel's K/V pairs: the two programs of a
cluster run consecutive query tiles of one head, so they read the same K rows in the same order. Each program's
loader warp copies one 16-column panel of every K tile into both programs (multicast); a relay warp passes every
release of a stage by its program's consumers to that stage's `pair_free` barrier in both programs; the loader
refills a stage once `pair_free` completed (both programs released it). The kernel refuses (traps on) a head of an
odd count of query tiles, and visits its tiles head by head. The consumer computes
O = Q + sum_j K_j (Q's rows plus every kv tile's rows, tile by tile), and all workers meet at a cluster barrier
before they end.
"""

import math

import numpy as np
import pytest
from example_programs import parse

from cubridge.interpreter import KernelPlan, ProblemShape, execute
from cubridge.interpreter.executor import find_kernel
from cubridge.interpreter.numerics import round_to_bf16

PAIRS = """
builtin.module {
  cuir.kernel @pairs(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x f32, strided>) threads 256 smem 16384 cluster 2x1x1 tile_m 64 schedule persistent head_by_head {
    %q_tile_smem = cuir.alloc : !cuir.smem<64x32xbf16>
    %k_tile = cuir.alloc : !cuir.smem<64x32xbf16, stages 2>
    %k_full = cuir.alloc : !cuir.mbarrier<2>
    %k_empty = cuir.alloc : !cuir.mbarrier<2>
    %pair_free = cuir.alloc : !cuir.mbarrier<2>
    cuir.mbarrier_init %k_full, 1 : !cuir.mbarrier<2>
    cuir.mbarrier_init %k_empty, 1 : !cuir.mbarrier<2>
    cuir.mbarrier_init %pair_free, 2 : !cuir.mbarrier<2>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c63 = arith.constant 63 : index
    %c64 = arith.constant 64 : index
    %seqlen_k = cuir.dim %k[2] : !cuir.global<4 x bf16, strided>
    %padded = arith.addi %seqlen_k, %c63 : index
    %kv_tiles = arith.divui %padded, %c64 : index
    %seqlen_q = cuir.dim %q[2] : !cuir.global<4 x bf16, strided>
    %q_padded = arith.addi %seqlen_q, %c63 : index
    %q_tiles = arith.divui %q_padded, %c64 : index
    %odd = arith.remui %q_tiles, %c2 : index
    %refused = arith.cmpi ne, %odd, %c0 : index
    scf.if %refused {
      cuir.trap
    }
    cuir.worker @loader threads 0 to 32 (%i) {
      %c16 = arith.constant 16 : index
      %rank = cuir.cluster_rank : index
      %column = arith.muli %rank, %c16 : index
      %count_end = cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%count = %c0) -> (index) {
        %count_next = scf.for %j = %c0 to %kv_tiles step %c1 iter_args(%n = %count) -> (index) {
          %stage = arith.remui %n, %c2 : index
          %round = arith.divui %n, %c2 : index
          %parity = arith.andi %round, %c1 : index
          %free_parity = arith.xori %parity, %c1 : index
          %kv_row = arith.muli %j, %c64 : index
          WAIT_FOR_THE_STAGE
          cuir.mbarrier_expect_tx %k_full[%stage], 4096 : !cuir.mbarrier<2>
          COPY_THE_PANEL
          %n_next = arith.addi %n, %c1 : index
          scf.yield %n_next : index
        }
        cuir.yield %count_next : index
      }
      END_BARRIER
    }
    cuir.worker @relay threads 32 to 64 (%r) {
      %rank = cuir.cluster_rank : index
      %peer = arith.xori %rank, %c1 : index
      %count_end = cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%count = %c0) -> (index) {
        %count_next = scf.for %j = %c0 to %kv_tiles step %c1 iter_args(%n = %count) -> (index) {
          %stage = arith.remui %n, %c2 : index
          %round = arith.divui %n, %c2 : index
          %parity = arith.andi %round, %c1 : index
          cuir.mbarrier_wait %k_empty[%stage], %parity : !cuir.mbarrier<2>
          cuir.mbarrier_arrive %pair_free[%stage] : !cuir.mbarrier<2>
          RELAY_TO_THE_PEER
          %n_next = arith.addi %n, %c1 : index
          scf.yield %n_next : index
        }
        cuir.yield %count_next : index
      }
      END_BARRIER
    }
    cuir.worker @consumer threads 128 to 256 (%g) {
      %count_end = cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%count = %c0) -> (index) {
        %row = arith.muli %q_tile, %c64 : index
        cuir.copy %q[%batch, %head, %row, %c0] -> %q_tile_smem : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x32xbf16>
        cuir.named_barrier_sync %c1, 128
        %q_regs = cuir.load %q_tile_smem : !cuir.smem<64x32xbf16> -> !cuir.tile<64x32xbf16, @consumer>
        cuir.named_barrier_sync %c1, 128
        %zero = cuir.fill 0.0 : !cuir.tile<64x32xf32, @consumer>
        %acc, %count_next = scf.for %j = %c0 to %kv_tiles step %c1 iter_args(%sum = %zero, %n = %count) -> (!cuir.tile<64x32xf32, @consumer>, index) {
          %stage = arith.remui %n, %c2 : index
          %round = arith.divui %n, %c2 : index
          %parity = arith.andi %round, %c1 : index
          cuir.mbarrier_wait %k_full[%stage], %parity : !cuir.mbarrier<2>
          %k_regs = cuir.load %k_tile[%stage] : !cuir.smem<64x32xbf16, stages 2> -> !cuir.tile<64x32xbf16, @consumer>
          cuir.mbarrier_arrive %k_empty[%stage] : !cuir.mbarrier<2>
          %added = cuir.map %sum, %k_regs (%a: f32, %b: bf16) {
            %wide = arith.extf %b : bf16 to f32
            %s = arith.addf %a, %wide : f32
            cuir.yield %s : f32
          } : !cuir.tile<64x32xf32, @consumer>, !cuir.tile<64x32xbf16, @consumer> -> !cuir.tile<64x32xf32, @consumer>
          %n_next = arith.addi %n, %c1 : index
          scf.yield %added, %n_next : !cuir.tile<64x32xf32, @consumer>, index
        }
        %out = cuir.map %acc, %q_regs (%a: f32, %b: bf16) {
          %wide = arith.extf %b : bf16 to f32
          %s = arith.addf %a, %wide : f32
          cuir.yield %s : f32
        } : !cuir.tile<64x32xf32, @consumer>, !cuir.tile<64x32xbf16, @consumer> -> !cuir.tile<64x32xf32, @consumer>
        cuir.store %out -> %o[%batch, %head, %row, %c0] : !cuir.tile<64x32xf32, @consumer> -> !cuir.global<4 x f32, strided>
        cuir.yield %count_next : index
      }
      END_BARRIER
    }
  }
}
"""

PAIR_PROTOCOL = {
    "WAIT_FOR_THE_STAGE": "cuir.mbarrier_wait %pair_free[%stage], %free_parity : !cuir.mbarrier<2>",
    "COPY_THE_PANEL": "cuir.copy_async %k[%batch, %head, %kv_row, %column] -> %k_tile[%stage], barrier "
                      "%k_full[%stage] columns 16 multicast : !cuir.global<4 x bf16, strided>, "
                      "!cuir.smem<64x32xbf16, stages 2>, !cuir.mbarrier<2>",
    "RELAY_TO_THE_PEER": "cuir.mbarrier_arrive %pair_free[%stage] cta %peer : !cuir.mbarrier<2>",
    "END_BARRIER": "cuir.cluster_barrier",
}

# B = 1, HQ = HKV = 2, SQ = 256 (four query tiles a head), SKV = 200 (four kv tiles, the last partial), D = 32.
# On two SMs one cluster runs all eight tiles, its programs consecutive query tiles of one head in turn.
SHAPE = ProblemShape(1, 2, 2, 256, 200, 32)


def _program(**changes: str) -> str:
    text = PAIRS
    for marker, line in (PAIR_PROTOCOL | changes).items():
        text = text.replace(marker, line)
    return text


def _run(text: str, shape: ProblemShape = SHAPE, num_sms: int = 2, seed: int | None = None):
    plan = KernelPlan(find_kernel(parse(text)))
    rng = np.random.default_rng(1)
    inputs = {
        name: round_to_bf16(rng.standard_normal(
            (shape.batch, shape.heads_q if name == "q" else shape.heads_kv,
             shape.seqlen_q if name == "q" else shape.seqlen_kv, shape.head_dim)))
        for name in ("q", "k", "v")
    }
    return inputs, execute(plan, shape, inputs, 1.0 / math.sqrt(shape.head_dim), schedule_seed=seed,
                           num_sms=num_sms)


def _expected(inputs, shape: ProblemShape) -> np.ndarray:
    """O = Q + sum over kv tiles of the tile's 64 rows (rows past the sequence are zero)."""
    kv_tiles = math.ceil(shape.seqlen_kv / 64)
    padded = np.zeros((*inputs["k"].shape[:2], kv_tiles * 64, shape.head_dim), np.float32)
    padded[:, :, : shape.seqlen_kv] = inputs["k"]
    tile_sum = padded.reshape(*padded.shape[:2], kv_tiles, 64, shape.head_dim).sum(axis=2, dtype=np.float32)
    q_tiles = math.ceil(shape.seqlen_q / 64)
    return inputs["q"] + np.tile(tile_sum, (1, 1, q_tiles, 1))[:, :, : shape.seqlen_q]


def _categories(run) -> list[str]:
    return [d.category for d in run.log.diagnostics]


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_the_pair_protocol_runs_clean_and_computes_its_sum(seed):
    inputs, run = _run(_program(), seed=seed)
    assert not run.log, run.log.diagnostics
    np.testing.assert_allclose(run.outputs["o"], _expected(inputs, SHAPE), rtol=1e-6, atol=1e-5)


def test_a_cluster_kernel_runs_whole_clusters():
    plan = KernelPlan(find_kernel(parse(_program())))
    assert plan.cluster_size == 2 and plan.threads == 32 + 32 + 128
    assert len(plan.program_tiles(SHAPE, num_sms=3)) == 2
    assert len(plan.program_tiles(ProblemShape(1, 1, 1, 64, 64, 32), num_sms=132)) == 2  # one tile, one cluster
    inputs, run = _run(_program(), num_sms=4)  # two clusters, each one head's four tiles
    assert not run.log, run.log.diagnostics
    np.testing.assert_allclose(run.outputs["o"], _expected(inputs, SHAPE), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("seed", [None, 0])
def test_a_loader_that_waits_for_its_own_release_only_overwrites_what_the_peer_still_reads(seed):
    own_release = "cuir.mbarrier_wait %k_empty[%stage], %free_parity : !cuir.mbarrier<2>"
    _, run = _run(_program(WAIT_FOR_THE_STAGE=own_release, RELAY_TO_THE_PEER=""), seed=seed)
    assert run.log and {d.kind for d in run.log.diagnostics} == {"race"}
    assert all("%k_tile" in d.message for d in run.log.diagnostics)
    if seed is not None:  # the peer's read is recorded before the copy: no release orders it first
        assert any(d.category == "stage overwrite" and "@consumer[0] of program 1" in d.message
                   for d in run.log.diagnostics)


def test_a_relay_that_never_reaches_the_peer_deadlocks_the_loaders():
    _, run = _run(_program(RELAY_TO_THE_PEER=""))
    assert _categories(run) and set(_categories(run)) == {"deadlock"}
    assert any("@loader[0] of program" in d.message and "%pair_free" in d.message for d in run.log.diagnostics)


def test_a_copy_into_this_program_only_leaves_the_peers_bytes_missing():
    local = PAIR_PROTOCOL["COPY_THE_PANEL"].replace(" multicast", "")
    _, run = _run(_program(COPY_THE_PANEL=local))
    assert "deadlock" in _categories(run)
    assert any("fewer tx bytes than expected arrive" in d.message for d in run.log.diagnostics)


def test_a_cluster_without_its_closing_barrier_may_exit_under_a_remote_arrival():
    _, run = _run(_program(END_BARRIER=""))
    assert set(_categories(run)) == {"cluster exit"}
    assert "no cluster barrier orders the arrival before the end of its instances" in run.log.diagnostics[0].message


def test_a_panel_outside_the_stage_faults():
    outside = PAIR_PROTOCOL["COPY_THE_PANEL"].replace("%column]", "%kv_row]")
    _, run = _run(_program(COPY_THE_PANEL=outside))
    assert "fault" in _categories(run)
    assert any("is not inside %k_tile's 32 columns" in d.message for d in run.log.diagnostics)


def test_tiles_go_head_by_head_so_that_a_cluster_shares_a_head():
    plan = KernelPlan(find_kernel(parse(_program())))
    programs = plan.program_tiles(ProblemShape(1, 2, 2, 256, 64, 32), num_sms=2)
    assert programs == [[(3, 0, 0), (1, 0, 0), (3, 1, 0), (1, 1, 0)], [(2, 0, 0), (0, 0, 0), (2, 1, 0), (0, 1, 0)]]


def test_a_trap_in_the_body_refuses_the_problem_before_any_worker_starts():
    odd = ProblemShape(1, 2, 2, 192, 200, 32)  # three query tiles a head
    plan = KernelPlan(find_kernel(parse(_program())))
    assert plan.refusal(odd) == plan.refusal(ProblemShape(1, 1, 1, 1, 1, 32)) is not None
    assert plan.refusal(SHAPE) is None
    _, run = _run(_program(), shape=odd)
    assert _categories(run) == ["refused"]
    assert "traps before any worker starts" in run.log.diagnostics[0].message
    assert np.isnan(run.outputs["o"]).all()


def test_a_trap_in_a_worker_is_a_fault_of_the_launch():
    _, run = _run(_program(END_BARRIER="cuir.trap"))
    assert _categories(run) == ["fault"]
    assert "cuir.trap: the launch aborts" in run.log.diagnostics[0].message
