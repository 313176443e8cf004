"""Every shipped entry point of attention_sm80.cu (the Ampere kernel: mma.sync fragment loops, cp.async groups)
lifts, and the lifted IR verifies in the executor against standard or causal attention on the smallest shapes
that cross each tile edge (q tile, kv tile, two kv tiles), with N(0, 1) and widened scores."""

from pathlib import Path

import pytest

from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.program import load_program
from cubridge.interpreter.verify import verify
from cubridge.runtime.primitives import HEADER_DIR

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm80.cu"
ENTRIES = [entry.name for entry in load_program(KERNEL, (HEADER_DIR.parent,)).entry_points()]
BLOCK_N = 64


def _causal_spec():
    from cubridge.frontends.spec import load_spec

    return load_spec(ROOT / "examples" / "specs" / "causal.py")


def test_every_instance_is_listed():
    assert len(ENTRIES) == 8
    assert {e.rsplit("_", 1)[1] for e in ENTRIES} == {"full", "causal"}


@pytest.mark.parametrize("entry", ENTRIES)
def test_lifted_instance_verifies(entry):
    head_dim = int(entry.split("_d")[1].split("_")[0])
    module = lift_cuda_file(KERNEL, entry).module
    spec = _causal_spec() if entry.endswith("causal") else None
    shapes = [(1, 2, 1, 129, BLOCK_N + 1, head_dim), (2, 2, 2, 65, 2 * BLOCK_N - 1, head_dim)]
    result = verify(module, spec=spec, shapes=shapes, seeds=(0, 1), schedules=1)
    assert result.ok, result.summary()


def test_a_kernel_change_reaches_the_lifted_ir(tmp_path):
    """The CUDA is the source of truth: leave one more cp.async group in flight before P V (V_j's) and the
    executor reports the read of the V tile the copy is still writing."""
    source = KERNEL.read_text()
    wait = "    wait_group<2>();  // V_j landed"
    assert source.count(wait) == 1
    broken = tmp_path / "attention_sm80.cu"
    broken.write_text(source.replace(wait, "    wait_group<3>();"))
    module = lift_cuda_file(broken, "attention_sm80_bf16_d128_full").module
    result = verify(module, shapes=[(1, 2, 1, 129, 3 * BLOCK_N + 1, 128)], seeds=(0,), schedules=1)
    assert not result.ok
    assert result.verdict == "race", result.summary()
