"""Execute CuIR kernels on numpy arrays, find races and deadlocks, and verify
them against an attention reference."""

from cubridge.interpreter.executor import KernelPlan, ProblemShape, execute
from cubridge.interpreter.reference import StandardAttention
from cubridge.interpreter.verify import VerificationResult, verify

__all__ = [
    "KernelPlan",
    "ProblemShape",
    "StandardAttention",
    "VerificationResult",
    "execute",
    "verify",
]
