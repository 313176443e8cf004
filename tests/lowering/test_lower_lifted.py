"""--lift --lower: the lift of the Hopper reference lowers back to its source byte for byte, for every entry
point; every op of a lift is located (the lowering matches ops by location). Lowering a transferred lift is
absent: a located one-line error says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.traits import IsTerminator

from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.program import load_program
from cubridge.runtime.compiler import INCLUDE_DIR
from cubridge.tools.cuir_opt import main as cuir_opt

REPOSITORY = Path(__file__).resolve().parents[2]
KERNEL = REPOSITORY / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu"
ENTRIES = [entry.name for entry in load_program(KERNEL, (INCLUDE_DIR,)).entry_points()]


@pytest.mark.parametrize("entry", [ENTRIES[0], ENTRIES[-1]])
def test_lift_then_lower_is_the_reference_source(entry, tmp_path):
    output = tmp_path / "out.cu"
    assert cuir_opt([f"--lift={entry}", "--lower", str(KERNEL), "-o", str(output)]) == 0
    assert output.read_bytes() == KERNEL.read_bytes()


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_lifted_op_is_located(entry):
    """Terminators aside: the lowering identifies one by its parent's location."""
    module = lift_cuda_file(KERNEL, entry).module
    unlocated = [
        op.name for op in module.walk()
        if op is not module and op.location == UNKNOWN_LOC and not op.has_trait(IsTerminator)
    ]
    assert not unlocated


def test_lowering_a_transferred_lift_is_a_located_error(tmp_path, capsys):
    output = tmp_path / "out.cu"
    spec = REPOSITORY / "examples" / "specs" / "causal.py"
    assert cuir_opt(["--lift", f"--transfer={spec}", "--lower", str(KERNEL), "-o", str(output)]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"{KERNEL.relative_to(REPOSITORY)}:") or error.startswith(f"{KERNEL}:")
    assert "lower: a transferred kernel whose exp2 folds the softmax scale" in error
    assert not output.exists()
