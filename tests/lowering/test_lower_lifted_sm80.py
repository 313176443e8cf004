"""--lift --transfer --lower on the Ampere reference: `cuir-opt --lift --lower attention_sm80.cu` is the source
byte for byte; `--lift --transfer=SPEC --lower` gives the CUDA that transferring and lowering the printed lift
(examples/ir/attention_sm80.mlir) gives, and that of the formerly hand-kept program (tests/transfer/inputs/
split_loop_sm80.mlir, which the sm80 runtime built from before the lift) but for the body of kv_range, for every
example spec; lifted back, every variant verifies (block lists and captured tables included).

Why kv_range differs: the hand-kept program has no mask branch, so the transfer splits its kv loop and the mask-free
positions are that split's bounds, clamped into [begin, end); the lift tests `needs_mask(position)`, whose bounds the
transfer sets to the plan's mask-free tiles as they are. Both give the same `needs_mask` on every visited
position."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from cubridge.diagnostics import parse_module
from cubridge.frontends.cuda.program import load_program
from cubridge.lowering import lower_module
from cubridge.passes.transfer import TransferPass
from cubridge.runtime.compiler import INCLUDE_DIR
from cubridge.tools.cuir_opt import CuirOptMain, main as cuir_opt

from lowering_helpers import lift_transfer_lower, lowered_lift_verification

REPOSITORY = Path(__file__).resolve().parents[2]
KERNEL = REPOSITORY / "cubridge" / "runtime" / "kernels" / "attention_sm80.cu"
PRINTED_LIFT = REPOSITORY / "examples" / "ir" / "attention_sm80.mlir"
HAND_KEPT = REPOSITORY / "tests" / "transfer" / "inputs" / "split_loop_sm80.mlir"
ENTRIES = [entry.name for entry in load_program(KERNEL, (INCLUDE_DIR,)).entry_points()]
SPECS = sorted((REPOSITORY / "examples" / "specs").glob("*.py"))

@pytest.fixture(scope="module")
def lifted_lowering(tmp_path_factory):
    """`cuir-opt --lift --transfer=SPEC --lower` of a spec, run once per spec for this module's tests."""
    directory = tmp_path_factory.mktemp("lowered")
    return cache(lambda spec: lift_transfer_lower(KERNEL, spec, directory / f"{spec.stem}.cu"))


def _lowered_program(program: Path, spec: Path) -> str:
    context = CuirOptMain(args=["-"]).ctx
    reference = parse_module(context, program.read_text(), str(program))
    variant = reference.clone()
    TransferPass(str(spec)).apply(context, variant)
    return lower_module(reference, variant, spec.stem).source


def _without_kv_range_body(source: str) -> str:
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if "static KvRange kv_range(" in line)
    end = next(i for i, line in enumerate(lines) if i > start and "return KvRange{" in line)
    return "\n".join(lines[: start + 1] + lines[end + 1 :])


@pytest.mark.parametrize("entry", [ENTRIES[0], ENTRIES[-1]])
def test_lift_then_lower_is_the_reference_source(entry, tmp_path):
    output = tmp_path / "out.cu"
    assert cuir_opt([f"--lift={entry}", "--lower", str(KERNEL), "-o", str(output)]) == 0
    assert output.read_bytes() == KERNEL.read_bytes()


@pytest.mark.parametrize("spec", SPECS, ids=lambda path: path.stem)
def test_lift_transfer_lower_is_the_printed_lifts(spec, lifted_lowering):
    assert lifted_lowering(spec) == _lowered_program(PRINTED_LIFT, spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda path: path.stem)
def test_lift_transfer_lower_is_the_hand_kept_programs_but_for_kv_range(spec, lifted_lowering):
    lowered, hand_kept = lifted_lowering(spec), _lowered_program(HAND_KEPT, spec)
    assert _without_kv_range_body(lowered) == _without_kv_range_body(hand_kept)


@pytest.mark.parametrize("name", [spec.stem for spec in SPECS])
def test_lowered_lift_lifts_back_and_verifies(name, tmp_path):
    result = lowered_lift_verification(KERNEL, REPOSITORY / "examples" / "specs" / f"{name}.py", tmp_path,
                                       "attention_sm80_bf16_d64")
    assert result.ok, result.summary()
