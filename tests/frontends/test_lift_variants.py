"""Lowered variants lift back: transfer a spec, lower it to CUDA, lift the variant's kernel from that CUDA and
verify it in the executor against the same spec (the lift reads the policies --lower writes)."""

from pathlib import Path

import pytest

from cubridge.dialect import cuir_context
from cubridge.diagnostics import parse_module
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter.verify import verify
from cubridge.lowering import lower_module
from cubridge.passes.transfer import TransferPass

ROOT = Path(__file__).resolve().parents[2]
# a mask of each bound shape, a score_mod, an activation (tests/lowering lifts every example spec back)
SPECS = ["causal", "sliding_window", "prefix_lm", "relative_position", "softcap", "sigmoid"]


# the Ampere reference: a mask, a score_mod (scores scaled before the policy, through `float& score`) and an
# activation (no softmax)
SM80_SPECS = ["causal", "softcap", "sigmoid"]


def _lowered_variant_verifies(reference_name: str, name: str, tmp_path) -> None:
    reference_path = ROOT / "examples" / "ir" / f"attention_{reference_name}.mlir"
    spec_path = ROOT / "examples" / "specs" / f"{name}.py"
    context = cuir_context()
    reference = parse_module(context, reference_path.read_text(), str(reference_path))
    variant = reference.clone()
    TransferPass(spec=str(spec_path)).apply(context, variant)
    lowered = tmp_path / f"{name}.cu"
    lowered.write_text(lower_module(reference, variant, name).source)
    module = lift_cuda_file(lowered, f"attention_{reference_name}_bf16_d128_{name}").module
    shapes = [(1, 2, 1, 129, 129, 128), (2, 2, 2, 65, 255, 128)]
    result = verify(module, spec=load_spec(str(spec_path)), shapes=shapes, seeds=(0, 1), schedules=1)
    assert result.ok, result.summary()


@pytest.mark.parametrize("name", SPECS)
def test_lowered_variant_lifts_and_verifies(name, tmp_path):
    _lowered_variant_verifies("sm90", name, tmp_path)


@pytest.mark.parametrize("name", SM80_SPECS)
def test_lowered_sm80_variant_lifts_and_verifies(name, tmp_path):
    _lowered_variant_verifies("sm80", name, tmp_path)
