"""Verify a kernel by execution: run it on random inputs and compare with a
float64 reference of its specification.

Runs: every shape (default: `shapes.default_shapes`, derived from the kernel
and the spec, on `VERIFY_NUM_SMS` multiprocessors) with every input seed
(default 0 and 1) under every schedule (default: round-robin and one seeded
random one); with the default shapes, also `shapes.offset_shapes` (lengths
that differ by a constant at a tile edge), `shapes.long_shapes` (one query
row over past a constant's count of kv tiles, and rows past that many query
tiles over one key) and, for a kernel over block
lists, `shapes.tile_aligned_case` (the spec over captured values the verifier
makes tile-aligned: the kernel serves any values), each with the first seed
under the round-robin schedule. Seed 0 draws q, k, v from N(0, 1); any other seed also scales
each query row by a log-uniform factor between 1 and `score_range(spec)`,
so that scores reach well past every cap, threshold or bias constant of the
spec, and a quarter of its rows score every key near -200 (where a kernel
that does not subtract the row's max gets 0). Column 0 of v is all ones, so
column 0 of o is the row sum of P (1 for softmax, the sum of the activations
for sigmoid and relu): it is checked as the output `rowsum`, apart from `o`
(the other columns). Fully masked rows
(by mask_mod, or a score_mod that gives -inf) have reference output 0 and
log-sum-exp -inf, as in FlexAttention.

Tolerances follow FlashAttention's criterion: the kernel may be at most twice
as far from the float64 reference as the same computation done in the
kernel's precision (`reference.kernel_precision`: float32 scores and sums,
P rounded to the input type, the output rounded to its type), plus a small
floor. The emulation runs three times: as numpy sums its scores, and with
every score moved up and down by the bound on a float32 dot product's
accumulation error (`reference.accumulation_bound`), since a kernel adds in
another order; the farthest of the three sets the yardstick. Scores that
cancel large terms (the widened rows above) are where that matters. For
each output, on the rows the run covered, with f the floor of the output's
type (bf16 2^-10, f16 2^-13, f32 2^-20: a quarter of the unit
roundoff for 16-bit types, a few ulps for float32, whose results differ by
the order of operations) and r = max(|ref|, 1) for lse (in the log domain,
errors are absolute), r = |ref| for o and rowsum:

    max_abs(kernel - ref) <= 2 * max(max_abs(emulated - ref)) + f * max(r)
    rel(kernel - ref)     <= 2 * max(rel(emulated - ref)) + f * |r| / |ref|

where rel is the Frobenius norm of the difference over that of ref (|.|).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from cubridge.diagnostics import CuBridgeError, verify_module
from cubridge.interpreter.executor import KernelPlan, ProblemShape, execute, find_kernel
from cubridge.interpreter.inputs import kernel_inputs
from cubridge.interpreter.numerics import rounding_for, type_name
from cubridge.interpreter.reference import (
    StandardAttention,
    accumulation_bound,
    kernel_precision,
    masked_scores,
)
from cubridge.interpreter.report import KINDS, Diagnostic
from cubridge.interpreter.shapes import (
    HEAD_CONFIGS,
    MIN_SCORE_RANGE,
    VERIFY_NUM_SMS,
    capture_reach,
    default_shapes,
    long_shapes,
    offset_shapes,
    score_range,
    tile_aligned_case,
)

ERROR_FACTOR = 2.0
SUNK_ROW_SHARE = 0.25  # of the query rows of a wide input
SUNK_SCORE = -200.0  # exp(-200) and 2^(-200 log2 e) are 0 in float32
SPEC_CAPTURES = "spec"  # a run's captured tensors hold the spec's values
TILE_ALIGNED = "tile-aligned"  # ... the values of `shapes.tile_aligned_case`
FLOORS = {"bf16": 2.0**-10, "f16": 2.0**-13, "f32": 2.0**-20}


@dataclass(frozen=True)
class OutputError:
    """How far one output is from the reference, and the bounds it must keep."""

    name: str
    max_abs: float
    max_abs_bound: float
    relative: float
    relative_bound: float

    @property
    def ok(self) -> bool:
        """Within both bounds; a bound that is not finite (a NaN reference) fails."""
        bounds = (self.max_abs_bound, self.relative_bound)
        return all(map(math.isfinite, bounds)) and self.max_abs <= bounds[0] and self.relative <= bounds[1]

    @property
    def severity(self) -> float:
        """The larger of the two error-to-bound ratios (above 1 fails)."""
        return max(_ratio(self.max_abs, self.max_abs_bound), _ratio(self.relative, self.relative_bound))

    def __str__(self) -> str:
        return (
            f"{self.name} max_abs={self.max_abs:.2e} (tol {self.max_abs_bound:.2e}) "
            f"rel={self.relative:.2e} (tol {self.relative_bound:.2e})"
        )


def _ratio(error: float, bound: float) -> float:
    if error == 0:
        return 0.0
    return error / bound if bound > 0 else math.inf


@dataclass(frozen=True)
class Run:
    """One execution: problem shape, input seed, schedule, whose captured values (`SPEC_CAPTURES` or
    `TILE_ALIGNED`), and its figures."""

    shape: ProblemShape
    seed: int
    schedule: str
    captures: str = SPEC_CAPTURES
    errors: tuple[OutputError, ...] = ()

    def describe(self) -> str:
        captures = "" if self.captures == SPEC_CAPTURES else f" captures={self.captures}"
        return f"{self.shape} seed={self.seed} schedule={self.schedule}{captures}"


@dataclass(frozen=True)
class _Case:
    """A shape to run with these seeds and schedules, against `spec` (whose captured values are `captures`)."""

    shape: ProblemShape
    seeds: tuple[int, ...]
    schedules: int
    spec: object
    captures: str = SPEC_CAPTURES


@dataclass
class VerificationResult:
    """The verdict (verified, mismatch, race, deadlock, fault, coverage or refused), the
    runs with their error figures, the diagnostics of the failing run, and
    notes on what the default runs leave out."""

    verdict: str
    runs: list[Run] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failing_run: Run | None = None
    notes: list[str] = field(default_factory=list)  # what the default runs leave out, and why

    @property
    def ok(self) -> bool:
        return self.verdict == "verified"

    def worst(self) -> dict[str, OutputError]:
        """The error of each output closest to (or furthest past) its bounds, over all runs."""
        worst: dict[str, OutputError] = {}
        for run in self.runs:
            for error in run.errors:
                known = worst.get(error.name)
                if known is None or error.severity > known.severity:
                    worst[error.name] = error
        return worst

    def shapes(self) -> list[ProblemShape]:
        """The shapes of the runs, in run order, each once."""
        return list(dict.fromkeys(run.shape for run in self.runs))

    def summary(self) -> str:
        """The one-line verdict, naming the failing run or the shapes that ran."""
        if self.diagnostics:
            return (
                f"{self.verdict}: {len(self.diagnostics)} diagnostic(s) at "
                f"{self.failing_run.describe()}"
            )
        if self.verdict == "mismatch":
            figures = "; ".join(str(e) for e in self.failing_run.errors)
            return f"mismatch: {figures} at {self.failing_run.describe()}"
        if not self.runs:
            return f"{self.verdict}: no shape ran ({'; '.join(self.notes)})"
        figures = "; ".join(str(e) for e in self.worst().values())
        seeds = ",".join(str(s) for s in dict.fromkeys(run.seed for run in self.runs))
        schedules = ",".join(dict.fromkeys(run.schedule for run in self.runs))
        captures = list(dict.fromkeys(run.captures for run in self.runs))
        captured = "" if captures == [SPEC_CAPTURES] else f", captured values {','.join(captures)}"
        shapes = self.shapes()
        sizes = " ".join(
            f"{s.batch},{s.heads_q},{s.heads_kv},{s.seqlen_q},{s.seqlen_kv}" for s in shapes
        )
        return (
            f"verified: {figures} (worst of {len(self.runs)} runs: seeds {seeds}, schedules "
            f"{schedules}{captured}, {len(shapes)} shape(s) B,HQ,HKV,SQ,SKV = {sizes}; D={shapes[0].head_dim})"
        )


def random_inputs(
    plan: KernelPlan, shape: ProblemShape, seed: int, widest: float = MIN_SCORE_RANGE
) -> dict[str, np.ndarray]:
    """q, k, v drawn from N(0, 1), rounded to the kernel's element type, never zero;
    column 0 of v is all ones. Seeds other than 0 scale each query row by a
    log-uniform factor between 1 and `widest`, and sink a share of the rows: every
    score of theirs is about `SUNK_SCORE` (scaled by 1 / sqrt(D)), where exp
    underflows unless the row's max is subtracted first."""
    rng = np.random.default_rng(seed)
    sizes = {
        "q": (shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
        "k": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
        "v": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
    }
    values = {name: rng.standard_normal(size).astype(np.float32) for name, size in sizes.items()}
    if seed != 0:
        row_scale = widest ** rng.random(sizes["q"][:3] + (1,))
        values["q"] *= row_scale.astype(np.float32)
        # rows whose every score lies far below 0: column 1 of k is all ones, and theirs of q large and negative
        sunk = rng.random(sizes["q"][:3]) < SUNK_ROW_SHARE
        values["k"][..., 1] = 1.0
        values["q"][..., 1] = np.where(sunk, SUNK_SCORE * math.sqrt(shape.head_dim), values["q"][..., 1])
    values["v"][..., 0] = 1.0
    inputs = {}
    for name, array in values.items():
        array[array == 0] = 0.5
        inputs[name] = rounding_for(plan.argument(name).type.element_type)(array)
    return inputs


def _sample_programs(count: int, programs: int | None, seed: int) -> list[int] | None:
    if programs is None or programs >= count:
        return None
    rng = np.random.default_rng(seed)
    return sorted(int(p) for p in rng.choice(count, size=programs, replace=False))


def _split_rowsum(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """o without column 0 as `o`, column 0 (the row sums of P) as `rowsum`, and lse."""
    split = {"o": outputs["o"][..., 1:], "rowsum": outputs["o"][..., 0]}
    if "lse" in outputs:
        split["lse"] = outputs["lse"]
    return split


class _Expected:
    """The float64 reference and the kernel-precision emulation of one input set."""

    def __init__(self, spec, plan: KernelPlan, inputs, scale: float):
        q, k, v = (inputs[n].astype(np.float64) for n in ("q", "k", "v"))
        reference = {"o": np.asarray(spec.reference(q, k, v, scale), dtype=np.float64).copy()}
        round_input = rounding_for(plan.argument("q").type.element_type)
        round_output = rounding_for(plan.argument("o").type.element_type)
        bound = accumulation_bound(inputs["q"], inputs["k"], scale)
        emulations = [
            kernel_precision(spec, inputs["q"], inputs["k"], inputs["v"], scale, round_input, round_output, shift)
            for shift in (None, bound, -bound)
        ]
        lse = spec.reference_lse(q, k, v, scale) if plan.argument("lse") is not None else None
        has_lse = lse is not None and "lse" in emulations[0]
        if has_lse:
            reference["lse"] = np.asarray(lse, dtype=np.float64).copy()
        else:
            for emulated in emulations:
                emulated.pop("lse", None)
        fully_masked = np.isneginf(masked_scores(spec, q, k, scale, np.float64)).all(axis=-1)
        reference["o"][fully_masked] = 0.0
        if has_lse:
            reference["lse"][fully_masked] = -np.inf
        self.reference = _split_rowsum(reference)
        self.emulations = [_split_rowsum(emulated) for emulated in emulations]
        self.types = {
            name: type_name(plan.argument("lse" if name == "lse" else "o").type.element_type)
            for name in self.reference
        }

    def compare(self, outputs: dict[str, np.ndarray], covered_rows: np.ndarray) -> tuple[OutputError, ...]:
        kernel = _split_rowsum(outputs)
        errors = []
        for name, reference in self.reference.items():
            rows = np.broadcast_to(
                covered_rows[..., None] if reference.ndim == 4 else covered_rows, reference.shape
            )
            errors.append(
                _output_error(
                    name,
                    kernel[name][rows],
                    [emulated[name][rows] for emulated in self.emulations],
                    reference[rows],
                    FLOORS[self.types[name]],
                )
            )
        return tuple(errors)


def _output_error(name: str, out, emulations, ref, floor: float) -> OutputError:
    """The kernel's distance from `ref` and the bounds set by the farthest emulation
    (the criterion of the module docstring)."""
    max_abs, relative = _distance(out, ref)
    emulated_abs, emulated_relative = map(max, zip(*(_distance(emulated, ref) for emulated in emulations)))
    finite = np.abs(ref[np.isfinite(ref)])
    floored = np.maximum(finite, 1.0) if name == "lse" else finite  # r of the criterion
    ref_norm = np.linalg.norm(finite)
    relative_floor = floor * np.linalg.norm(floored) / ref_norm if ref_norm > 0 else 0.0
    return OutputError(
        name,
        max_abs,
        ERROR_FACTOR * emulated_abs + floor * float(floored.max(initial=0.0)),
        relative,
        ERROR_FACTOR * emulated_relative + float(relative_floor),
    )


def _distance(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Max abs and relative Frobenius distance; equal infinities count as 0, NaN as inf."""
    out = out.astype(np.float64)
    same_infinity = np.isinf(ref) & (out == ref)
    with np.errstate(invalid="ignore"):
        difference = np.where(same_infinity, 0.0, out - ref)
    difference = np.where(np.isnan(difference), np.inf, difference)
    if not difference.size:
        return 0.0, 0.0
    scale = np.linalg.norm(np.where(np.isinf(ref), 0.0, ref))
    with np.errstate(invalid="ignore"):
        error = float(np.linalg.norm(difference))
    relative = error / scale if scale > 0 else error
    return float(np.abs(difference).max()), float(relative)


def _check_evaluable(spec, shape: ProblemShape) -> None:
    """A spec's hooks divide by no zero and read inside their captured tensors at `shape`, else a located
    CuBridgeError (as at a launch), before the executor would fault on it."""
    check = getattr(spec, "check_evaluable", None)  # standard attention has no hooks
    if check is not None:
        check((shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
              (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim))


def _tables(spec, plan: KernelPlan, inputs) -> dict[str, np.ndarray]:
    """The captured tensors the kernel takes as arguments, from the spec."""
    if not plan.tables:
        return {}
    return kernel_inputs(spec, plan.kernel, inputs["q"], inputs["k"], inputs["v"])


def verify(
    module: ModuleOp,
    spec=None,
    shapes=None,
    seeds=(0, 1),
    schedules: int = 2,
    programs: int | None = None,
    num_sms: int = VERIFY_NUM_SMS,
) -> VerificationResult:
    """Execute the kernel of `module` and compare it with `spec` (standard attention by default).

    Each shape (a ProblemShape or a (B, HQ, HKV, SQ, SKV, D) tuple; default:
    `default_shapes` of the kernel and spec; `offset_shapes`, `long_shapes` and `tile_aligned_case` once, with
    the first seed and the round-robin schedule) runs with each input seed (0: N(0, 1),
    others: widened scores; see `random_inputs`) under `schedules` schedules:
    the round-robin one, then seeded random ones.
    `programs` runs a seeded sample of that many programs instead of all.
    The first run with diagnostics or a mismatch ends verification with its verdict.
    """
    verify_module(module)
    plan = KernelPlan(find_kernel(module))
    spec = spec or StandardAttention()
    cases = [_Case(s if isinstance(s, ProblemShape) else ProblemShape(*s), seeds, schedules, spec)
             for s in shapes or ()]
    notes = []
    if shapes is None:
        defaults = default_shapes(plan.kernel, spec, plan.head_dim)
        cases = [_Case(shape, seeds, schedules, spec) for shape in defaults]
        reach = capture_reach(plan.kernel, spec, plan.head_dim)
        if not cases or (reach is not None and reach.longest == 0):
            reason = f": {reach.reason.message}" if reach is not None else ""
            raise CuBridgeError(f"no default shape fits the spec's captured tensors{reason}",
                                reach.reason.location if reach is not None else None)
        if reach is not None:
            notes.append(reach.note())
            longest = ProblemShape(*HEAD_CONFIGS[0], reach.longest, reach.longest, plan.head_dim)
            if all(case.shape != longest for case in cases):
                cases.append(_Case(longest, seeds[:1], 1, spec))
        offsets = offset_shapes(plan.kernel, spec, plan.head_dim, defaults)
        cases += [_Case(shape, seeds[:1], 1, spec) for shape in offsets]
        cases += [_Case(shape, seeds[:1], 1, spec) for shape in long_shapes(plan.kernel, spec, plan.head_dim)]
        aligned = tile_aligned_case(plan.kernel, spec, plan.head_dim)
        if aligned is not None:
            aligned_spec, aligned_shape = aligned
            cases.append(_Case(aligned_shape, seeds[:1], 1, aligned_spec, TILE_ALIGNED))
    for case in cases:  # every shape's checks before any run: a located spec error before an executor fault
        plan.check_shape(case.shape)
        _check_evaluable(case.spec, case.shape)
    if shapes is None:  # the default shapes the kernel serves (a cluster kernel's CTAs must share a head)
        refused = [(case.shape, trap) for case in cases if (trap := plan.refusal(case.shape)) is not None]
        if refused:
            cases = [case for case in cases if case.shape not in {shape for shape, _ in refused}]
            notes.append(f"{len(refused)} default shape(s) not run: {refused[0][1]} traps on them (the kernel "
                         f"refuses them; the first {refused[0][0]})")
        if not cases:
            return VerificationResult("refused", notes=notes)
    widest = score_range(spec)
    result = VerificationResult("verified", notes=notes)
    for case in cases:
        shape, spec = case.shape, case.spec
        scale = 1.0 / math.sqrt(shape.head_dim)
        for seed in case.seeds:
            inputs = random_inputs(plan, shape, seed, widest)
            tables = _tables(spec, plan, inputs)
            selected = _sample_programs(len(plan.program_tiles(shape, num_sms, tables)), programs, seed)
            expected = None
            for index in range(case.schedules):
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
                if execution.log:
                    diagnostics = execution.log.diagnostics
                    verdict = min((d.kind for d in diagnostics), key=KINDS.index)
                    return VerificationResult(verdict, result.runs, diagnostics, Run(shape, seed, label, case.captures),
                                              notes)
                expected = expected or _Expected(spec, plan, inputs, scale)
                run = Run(shape, seed, label, case.captures,
                          expected.compare(execution.outputs, execution.covered_rows))
                result.runs.append(run)
                if not all(error.ok for error in run.errors):
                    return VerificationResult("mismatch", result.runs, [], run, notes)
    return result
