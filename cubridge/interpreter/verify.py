"""Verify a kernel by execution: run it on random inputs and compare with a
float64 reference of its specification.

Tolerances bound the relative Frobenius error of each output, by the
output's element type. They leave a wide margin over what the examples
reach (about 3e-3 for bf16 outputs, 1e-7 for the f32 log-sum-exp), and stay
far below what a wrong mask or a dropped tile gives (above 1e-1):

    bf16: 2e-2    f16: 5e-3    f32: 1e-4
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from cubridge.diagnostics import verify_module
from cubridge.interpreter.executor import (
    DEFAULT_NUM_SMS,
    KernelPlan,
    ProblemShape,
    execute,
    find_kernel,
)
from cubridge.interpreter.numerics import rounding_for, type_name
from cubridge.interpreter.reference import StandardAttention
from cubridge.interpreter.report import KINDS, Diagnostic

TOLERANCES = {"bf16": 2e-2, "f16": 5e-3, "f32": 1e-4}

# (B, HQ, HKV, SQ, SKV): no sequence length is a multiple of a tile size;
# grouped-query heads, batch > 1 and SQ != SKV all appear.
DEFAULT_SIZES = ((2, 4, 2, 200, 300), (1, 2, 2, 77, 77), (1, 3, 1, 300, 129))


def default_shapes(head_dim: int) -> list[ProblemShape]:
    return [ProblemShape(*sizes, head_dim) for sizes in DEFAULT_SIZES]


@dataclass(frozen=True)
class OutputError:
    """How far one output is from the reference, on the rows the run covered."""

    name: str
    relative_frobenius: float
    max_abs: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.relative_frobenius <= self.tolerance

    def __str__(self) -> str:
        return (
            f"{self.name} rel_frob={self.relative_frobenius:.2e} "
            f"(tol {self.tolerance:.0e}) max_abs={self.max_abs:.2e}"
        )


@dataclass(frozen=True)
class Run:
    """One execution: problem shape, input seed, schedule, and its figures."""

    shape: ProblemShape
    seed: int
    schedule: str
    errors: tuple[OutputError, ...] = ()

    def describe(self) -> str:
        return f"{self.shape} seed={self.seed} schedule={self.schedule}"


@dataclass
class VerificationResult:
    """The verdict (verified, mismatch, race, deadlock, fault or coverage), the
    runs with their error figures, and the diagnostics of the failing run."""

    verdict: str
    runs: list[Run] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failing_run: Run | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "verified"

    def worst(self) -> dict[str, OutputError]:
        """The largest relative error of each output over all runs."""
        worst: dict[str, OutputError] = {}
        for run in self.runs:
            for error in run.errors:
                known = worst.get(error.name)
                if known is None or error.relative_frobenius > known.relative_frobenius:
                    worst[error.name] = error
        return worst

    def summary(self) -> str:
        """The one-line verdict."""
        if self.diagnostics:
            return (
                f"{self.verdict}: {len(self.diagnostics)} diagnostic(s) at "
                f"{self.failing_run.describe()}"
            )
        figures = "; ".join(str(e) for e in self.worst().values())
        if self.verdict == "mismatch":
            return f"mismatch: {figures} at {self.failing_run.describe()}"
        return f"verified: {figures} (worst of {len(self.runs)} run(s))"


def random_inputs(plan: KernelPlan, shape: ProblemShape, seed: int) -> dict[str, np.ndarray]:
    """q, k, v drawn from N(0, 1), rounded to the kernel's element type, never zero."""
    rng = np.random.default_rng(seed)
    sizes = {
        "q": (shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
        "k": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
        "v": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
    }
    inputs = {}
    for name, size in sizes.items():
        values = rng.standard_normal(size).astype(np.float32)
        values[values == 0] = 0.5
        inputs[name] = rounding_for(plan.argument(name).type.element_type)(values)
    return inputs


def _sample_programs(count: int, programs: int | None, seed: int) -> list[int] | None:
    if programs is None or programs >= count:
        return None
    rng = np.random.default_rng(seed)
    return sorted(int(p) for p in rng.choice(count, size=programs, replace=False))


def _tolerance(plan: KernelPlan, name: str, override: float | None) -> float:
    if override is not None:
        return override
    return TOLERANCES[type_name(plan.argument(name).type.element_type)]


def _compare(name: str, execution, ref: np.ndarray, tolerance: float) -> OutputError:
    """Relative Frobenius and max abs error on the rows the executed programs own."""
    out = execution.outputs[name]
    rows = execution.covered_rows
    mask = np.broadcast_to(rows[..., None] if out.ndim == 4 else rows, out.shape)
    out, ref = out[mask].astype(np.float64), ref[mask]
    same_infinity = np.isinf(ref) & (out == ref)
    with np.errstate(invalid="ignore"):
        difference = np.where(same_infinity, 0.0, out - ref)
    finite_ref = np.where(np.isinf(ref), 0.0, ref)
    scale = np.linalg.norm(finite_ref)
    error = np.linalg.norm(difference)
    relative = float(error / scale) if scale > 0 else float(error)
    max_abs = float(np.abs(difference).max()) if difference.size else 0.0
    if np.isnan(relative):
        relative = math.inf
    return OutputError(name, relative, max_abs, tolerance)


def _references(spec, plan: KernelPlan, inputs, scale: float) -> dict[str, np.ndarray]:
    """The spec's float64 outputs (arrays or CPU tensors) for float64 inputs."""
    q, k, v = (inputs[n].astype(np.float64) for n in ("q", "k", "v"))
    references = {"o": np.asarray(spec.reference(q, k, v, scale), dtype=np.float64)}
    if plan.argument("lse") is not None and spec.normalization == "softmax":
        lse = spec.reference_lse(q, k, v, scale)
        if lse is not None:
            references["lse"] = np.asarray(lse, dtype=np.float64)
    return references


def _tables(spec, plan: KernelPlan, inputs) -> dict[str, np.ndarray]:
    """The captured tensors the kernel takes as arguments, from the spec."""
    if not plan.tables:
        return {}
    return spec.extra_inputs(plan.kernel, inputs["q"], inputs["k"], inputs["v"])


def verify(
    module: ModuleOp,
    spec=None,
    shapes=None,
    seeds=(0,),
    tolerance: float | None = None,
    schedules: int = 1,
    programs: int | None = None,
    num_sms: int = DEFAULT_NUM_SMS,
) -> VerificationResult:
    """Execute the kernel of `module` and compare it with `spec` (standard attention by default).

    Each shape (a ProblemShape or a (B, HQ, HKV, SQ, SKV, D) tuple; default:
    `default_shapes`) runs with each input seed under `schedules` schedules:
    the round-robin one, then seeded random ones.
    `programs` runs a seeded sample of that many programs instead of all.
    `tolerance` overrides the per-type bound on relative Frobenius error.
    The first run with diagnostics ends verification with their verdict.
    """
    verify_module(module)
    plan = KernelPlan(find_kernel(module))
    spec = spec or StandardAttention()
    if shapes is None:
        shapes = default_shapes(plan.head_dim)
    shapes = [s if isinstance(s, ProblemShape) else ProblemShape(*s) for s in shapes]
    for shape in shapes:
        plan.check_shape(shape)
    result = VerificationResult("verified")
    for shape in shapes:
        scale = 1.0 / math.sqrt(shape.head_dim)
        program_count = len(plan.program_tiles(shape, num_sms))
        for seed in seeds:
            inputs = random_inputs(plan, shape, seed)
            tables = _tables(spec, plan, inputs)
            selected = _sample_programs(program_count, programs, seed)
            references = None
            for index in range(schedules):
                label = "round-robin" if index == 0 else f"random#{index}"
                schedule_seed = None if index == 0 else seed * 7919 + index
                execution = execute(
                    plan,
                    shape,
                    inputs,
                    scale,
                    schedule_seed=schedule_seed,
                    programs=selected,
                    num_sms=num_sms,
                    tables=tables,
                )
                run = Run(shape, seed, label)
                if execution.log:
                    diagnostics = execution.log.diagnostics
                    verdict = min((d.kind for d in diagnostics), key=KINDS.index)
                    return VerificationResult(verdict, result.runs, diagnostics, run)
                if references is None:
                    references = _references(spec, plan, inputs, scale)
                errors = tuple(
                    _compare(name, execution, reference, _tolerance(plan, name, tolerance))
                    for name, reference in references.items()
                )
                run = Run(shape, seed, label, errors)
                result.runs.append(run)
                if result.ok and not all(e.ok for e in errors):
                    result.verdict = "mismatch"
                    result.failing_run = run
    return result
