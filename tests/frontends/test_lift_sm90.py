"""Every shipped entry point of attention_sm90.cu lifts, and the lifted IR verifies in the executor against
standard or causal attention on the smallest shapes that cross each tile edge (q tile, consumer half, kv
tile, two kv tiles), with N(0, 1) and widened scores."""

import math
from pathlib import Path

import pytest

from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.program import load_program
from cubridge.interpreter.verify import verify
from cubridge.runtime.attention_sm90 import WIDE_MIN_SEQLEN_K, kv_tile_keys
from cubridge.runtime.primitives import HEADER_DIR

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu"
ENTRIES = [entry.name for entry in load_program(KERNEL, (HEADER_DIR.parent,)).entry_points()]


def _causal_spec():
    from cubridge.frontends.spec import load_spec

    return load_spec(ROOT / "examples" / "specs" / "causal.py")


def test_every_instance_is_listed():
    assert len(ENTRIES) == 18
    assert {e.removesuffix("_pairs").rsplit("_", 1)[1] for e in ENTRIES} == {"full", "causal"}
    assert sum(e.endswith("_pairs") for e in ENTRIES) == 4  # two-CTA clusters: the K/V pair protocol


@pytest.mark.parametrize("entry", ENTRIES)
def test_lifted_instance_verifies(entry):
    head_dim = int(entry.split("_d")[1].split("_")[0])
    block_n = kv_tile_keys(head_dim, entry.endswith("causal"), WIDE_MIN_SEQLEN_K if "_kv" in entry else 1)
    module = lift_cuda_file(KERNEL, entry).module
    spec = _causal_spec() if entry.endswith("causal") else None
    rows = 255 if entry.endswith("_pairs") else 65  # a pair kernel serves heads of an even count of query tiles
    shapes = [(1, 2, 1, 129, block_n + 1, head_dim), (2, 2, 2, rows, 2 * block_n - 1, head_dim)]
    result = verify(module, spec=spec, shapes=shapes, seeds=(0, 1), schedules=1)
    assert result.ok, result.summary()


def _lift_edited(tmp_path, old: str, new: str, entry: str | None = None):
    """The lift of attention_sm90.cu (entry point `entry`, default the first) with its one occurrence of `old`
    replaced by `new`."""
    source = KERNEL.read_text()
    assert source.count(old) == 1
    edited = tmp_path / "attention_sm90.cu"
    edited.write_text(source.replace(old, new))
    return lift_cuda_file(edited, entry).module


PAIRS = "attention_sm90_bf16_d128_full_pairs"
PAIR_SHAPES = [(1, 2, 1, 129, 3 * 128 + 1, 128), (2, 2, 2, 255, 2 * 128 - 1, 128)]


def test_the_pair_entry_verifies_with_the_defaults_it_serves():
    """The K/V pairs lift as two-CTA clusters (relay warps, remote arrivals, multicast panels, a closing cluster
    barrier), which the executor runs together; the default shapes whose heads have an odd count of query tiles
    are the kernel's refusal (its trap), not run."""
    module = lift_cuda_file(KERNEL, PAIRS).module
    result = verify(module)
    assert result.ok, result.summary()
    assert any("traps on them (the kernel refuses them" in note for note in result.notes)
    assert all(math.ceil(shape.seqlen_q / 128) % 2 == 0 for shape in result.shapes())


def test_a_pair_kernel_refuses_an_odd_count_of_query_tiles():
    result = verify(lift_cuda_file(KERNEL, PAIRS).module, shapes=[(1, 1, 1, 65, 129, 128)], seeds=(0,), schedules=1)
    assert result.verdict == "refused", result.summary()
    assert "traps before any worker starts" in result.diagnostics[0].message


@pytest.mark.parametrize("old, new, verdict, category", [
    # the loader refills a stage once its own CTA released it, not the peer: its multicast overwrites the peer's
    ("  mbarrier_wait(free_barrier, at.free_parity());\n", "", "race", None),
    # a relay that passes the release to its own CTA only: no phase of pair_free completes
    ("        mbarrier_arrive_cluster(free_barrier, peer);\n", "", "deadlock", "deadlock"),
    # no cluster barrier before the CTAs exit: a peer's relay may arrive on a CTA that has exited
    ("  if constexpr (Policy::kSharesKvInPair) cluster_sync();  // no CTA exits", "  // no CTA exits", "race",
     "cluster exit"),
])
def test_a_pair_protocol_bug_reaches_the_lifted_ir(tmp_path, old, new, verdict, category):
    module = _lift_edited(tmp_path, old, new, PAIRS)
    result = verify(module, shapes=PAIR_SHAPES, seeds=(0,), schedules=1)
    assert result.verdict == verdict, result.summary()
    assert category is None or any(d.category == category for d in result.diagnostics), result.diagnostics


def test_a_kernel_change_reaches_the_lifted_ir(tmp_path):
    """The CUDA is the source of truth: drop the consumers' release of K in the kv loop (D = 128's, once S has
    landed) and the lifted program deadlocks in the executor (the producer waits for a stage nobody frees)."""
    release = "      if constexpr (kReleaseKOnScores<kHeadDim, Policy>) release(smem.k_empty(stage), lane);\n"
    module = _lift_edited(tmp_path, f"      gemm_fence_operand(s);\n{release}      auto retire_pv_in_softmax",
                          "      gemm_fence_operand(s);\n      auto retire_pv_in_softmax")
    result = verify(module, shapes=[(1, 2, 1, 129, 3 * 128 + 1, 128)], seeds=(0,), schedules=1)
    assert not result.ok
    assert result.verdict == "deadlock", result.summary()


def test_the_wait_inside_the_softmax_reaches_the_lifted_ir(tmp_path):
    """P V retires inside the softmax, in a lambda the kv step passes down to softmax_update: without its
    gemm_wait_after the rescale of O reads the P V accumulator in flight, a race the executor names."""
    module = _lift_edited(tmp_path, "          gemm_wait_after(exps_sum);\n", "")
    result = verify(module, shapes=[(1, 2, 1, 129, 2 * 128 + 1, 128)], seeds=(0,), schedules=1)
    assert result.verdict == "race", result.summary()
    assert any("before its cuir.gemm_wait" in diagnostic.message for diagnostic in result.diagnostics)


def test_a_gemm_operand_given_by_address_is_its_tile(tmp_path):
    """gemm_async takes its shared tiles by gemm_tile_address (`smem.k_tile_address(stage)`): the lift reads the
    address as the tile it names (profile `shared_storage.addresses`), so a score GEMM pointed at V's address
    lifts to a GEMM on V, and the program verifies wrong."""
    step_gemm = ("smem.k_tile_address(stage),\n                                               Layout::kKvPanelBytes, false);\n"
                 "      if constexpr (kVBehindK")
    module = _lift_edited(tmp_path, step_gemm, step_gemm.replace("k_tile_address", "v_tile_address"))
    assert "cuir.gemm_async abt %q_half[%group], %v_tile[" in str(module)
    result = verify(module, shapes=[(1, 2, 1, 129, 2 * 128 + 1, 128)], seeds=(0,), schedules=1)
    assert not result.ok, result.summary()


def test_pairs_need_every_tile_of_a_head_to_visit_the_same_kv_tiles():
    """A causal mask's query tiles visit different kv tiles, so a pair's two CTAs would not read the same K and V
    rows: transferred onto the pair program, the executor finds the longer tile's consumers waiting for a K panel
    its peer never loads (the lowering gives causal no pair entry points; this is why)."""
    from cubridge.interpreter.executor import find_kernel
    from cubridge.passes.transfer import transfer_kernel

    module = lift_cuda_file(KERNEL, PAIRS).module
    transfer_kernel(find_kernel(module), _causal_spec())
    result = verify(module, spec=_causal_spec(), shapes=PAIR_SHAPES, seeds=(0,), schedules=1)
    assert result.verdict == "deadlock", result.summary()
    assert any("fewer tx bytes than expected arrive" in d.message for d in result.diagnostics)
