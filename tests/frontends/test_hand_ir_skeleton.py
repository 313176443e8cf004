"""The hand-kept examples/ir/attention_sm90.mlir (what --transfer reads until it accepts lifted IR) agrees with
the lift of attention_sm90.cu on every wait, release, copy, GEMM turn and async op, in order, per worker;
it differs only where the issue says the hand-kept file simplifies the CUDA."""

import difflib
from pathlib import Path

from cubridge.dialect import cuir_context
from cubridge.dialect.cuir import WorkerOp
from cubridge.diagnostics import parse_module
from cubridge.frontends.cuda import lift_cuda_file

ROOT = Path(__file__).resolve().parents[2]
SKELETON_OPS = (
    "cuir.mbarrier_wait", "cuir.mbarrier_arrive", "cuir.mbarrier_expect_tx", "cuir.copy_async",
    "cuir.named_barrier_sync", "cuir.named_barrier_arrive", "cuir.gemm_fence", "cuir.gemm_async",
    "cuir.gemm_wait", "cuir.commit_group", "cuir.wait_group", "cuir.store", "cuir.store_async",
    "cuir.fence_async_shared", "cuir.for_each_tile", "scf.for", "scf.if",
)
MBARRIER_OPS = ("cuir.mbarrier_wait", "cuir.mbarrier_arrive", "cuir.mbarrier_expect_tx")
# What only the CUDA (so only the lift) has, in order per worker.
CUDA_ONLY = {
    # the producer's wait for the release of the last tile's Q, after its tile loop
    "producer": [["mbarrier_wait q_empty"]],
    # bounds only on the kv tiles that need them (first tile, loop); the epilogue's two barriers around the
    # staged O; the O store only for a tile inside the sequence
    "consumer": [["scf.if"], ["scf.if"], ["named_barrier_sync"], ["named_barrier_sync", "scf.if"]],
}


def _skeleton(module) -> dict[str, list[str]]:
    skeletons = {}
    for worker in module.walk():
        if not isinstance(worker, WorkerOp):
            continue
        steps = []
        for op in worker.walk():
            if op.name not in SKELETON_OPS:
                continue
            step = op.name.removeprefix("cuir.")
            if op.name in MBARRIER_OPS:
                step += " " + op.operands[0].name_hint
            steps.append(step)
        skeletons[worker.sym_name.data] = steps
    return skeletons


def test_hand_kept_ir_matches_the_lift():
    path = ROOT / "examples" / "ir" / "attention_sm90.mlir"
    hand = _skeleton(parse_module(cuir_context(), path.read_text(), str(path)))
    lifted = _skeleton(lift_cuda_file(ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu").module)
    assert sorted(hand) == sorted(lifted) == sorted(CUDA_ONLY)
    for worker, steps in hand.items():
        matcher = difflib.SequenceMatcher(a=steps, b=lifted[worker], autojunk=False)
        changes = [(tag, lifted[worker][j1:j2]) for tag, _, _, j1, j2 in matcher.get_opcodes() if tag != "equal"]
        assert changes == [("insert", chunk) for chunk in CUDA_ONLY[worker]], worker
