"""Shared helpers of the lowering tests on lifted kernels: `cuir-opt --lift --transfer=SPEC --lower` of a reference
kernel, and the lift of such a lowered source verified by execution."""

from __future__ import annotations

from pathlib import Path

from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.spec import load_spec
from cubridge.interpreter.verify import VerificationResult, verify
from cubridge.tools.cuir_opt import main as cuir_opt

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "cubridge" / "runtime" / "kernels"


def lift_transfer_lower(kernel: Path, spec: Path, output: Path) -> str:
    """The source `cuir-opt --lift --transfer=spec --lower kernel -o output` writes."""
    assert cuir_opt(["--lift", f"--transfer={spec}", "--lower", str(kernel), "-o", str(output)]) == 0
    return output.read_text()


def lowered_lift_verification(kernel: Path, spec: Path, directory: Path, entry_prefix: str) -> VerificationResult:
    """The spec at `spec` lifted, transferred and lowered onto `kernel`, then its entry point
    `<entry_prefix>_<spec's stem>` lifted back and verified against the spec on the default verification's
    shapes and seeds (one schedule)."""
    name = spec.stem
    lowered = directory / f"{name}.cu"
    lift_transfer_lower(kernel, spec, lowered)
    module = lift_cuda_file(lowered, f"{entry_prefix}_{name}").module
    return verify(module, spec=load_spec(str(spec)), schedules=1)
