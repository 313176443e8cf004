"""The values a traced hook takes over a whole problem: bounds of its expressions for every (b, h, q_idx, kv_idx)
of a shape, from the captured tensors' values.

A launch runs shapes far larger than the ones the executor verified, so what depends on the shape is checked at
the launch's own: that no integer division or remainder divides by zero (torch refuses it on the CPU, the GPU's
quotient is meaningless), that every captured-tensor read stays inside its table, and that every integer the
kernel computes fits the 32-bit `int` the lowering gives hook integers (the executor faults on the same values at
its shapes). `intervals` takes interval arithmetic over the expressions (instant, and exact for the sums,
products and divisions of indices that hooks are made of). Where an interval leaves the allowed range (or holds a
divisor's 0), `excess` (`takes_zero`) looks for a value the hook really takes there: first on the grid's edges
(the first, middle and last indices of each dimension), then on the whole grid, chunked over query rows, so that
only a real value refuses a launch; a grid past GRID_LIMIT_ELEMENTS is not evaluated, and the interval's bound
stands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr, evaluate

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UNKNOWN = (-math.inf, math.inf)
GRID_CHUNK_ELEMENTS = 1 << 24  # elements of one chunk of the exhaustive evaluation (128 MiB of int64)
GRID_LIMIT_ELEMENTS = 1 << 34  # the largest grid evaluated whole (S = 128k with (q_idx, kv_idx) alone)

Interval = tuple[float, float]  # inclusive bounds; integer-valued for integer expressions where finite

# Integer ops whose value can leave the 32-bit int, as the executor checks them (cubridge/interpreter/arith_ops.py)
WIDENING_OPS = {"const": "constant", "add": "sum", "sub": "difference", "mul": "product", "shl": "left shift"}
# Integer ops that divide by their second operand (the executor faults on a zero divisor too)
INTEGER_DIVISIONS = {"floordiv": "floor division", "truncdiv": "division", "ceildiv": "ceiling division",
                     "mod": "remainder", "fmod": "remainder"}

_MONOTONE = {  # monotone functions of one float: non-decreasing, or non-increasing (acos)
    "exp": math.exp, "exp2": lambda x: 2.0**x, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)), "erf": math.erf, "floor": math.floor, "ceil": math.ceil,
    "trunc": math.trunc, "round": round, "atan": math.atan, "asin": math.asin, "acos": math.acos,
    "sinh": math.sinh,
}
_ROUNDINGS = (math.floor, math.ceil, math.trunc, round)  # integer-valued: an infinity stays itself


class Problem:
    """A problem's index ranges (B, HQ, SQ, SKV) and the captured tensors the hooks read, whose value ranges are
    taken once, when an interval first needs them."""

    def __init__(self, shape: tuple[int, int, int, int], captures: dict[str, torch.Tensor], device=None):
        self.shape = shape
        self.captures = captures
        self.device = device or next((t.device for t in captures.values()), torch.device("cpu"))
        self._table_ranges: dict[str, Interval] = {}

    def argument(self, name: str) -> Interval:
        if name == "score":
            return UNKNOWN
        extent = dict(zip(("b", "h", "q_idx", "kv_idx"), self.shape))[name]
        return (0, extent - 1)

    def table(self, name: str) -> Interval:
        """The least and greatest value of captured tensor `name` (bools as 0 and 1; NaN anywhere: unknown)."""
        if name not in self._table_ranges:
            tensor = self.captures[name]
            if tensor.numel() == 0:
                found = UNKNOWN
            elif tensor.is_floating_point():
                low, high = torch.aminmax(tensor.detach().double())
                found = UNKNOWN if math.isnan(low) or math.isnan(high) else (float(low), float(high))
            else:
                low, high = torch.aminmax(tensor.detach().long())
                found = (int(low), int(high))
            self._table_ranges[name] = found
        return self._table_ranges[name]


def intervals(exprs: tuple[Expr | None, ...], problem: Problem) -> dict[Expr, Interval]:
    """An interval holding every value of each node of `exprs` over `problem` (interval arithmetic: it may be
    wider than the values, never narrower; a float node's is on real numbers, which its float32 values meet
    within rounding, and an integer made from a float allows for that rounding)."""
    found: dict[Expr, Interval] = {}

    def visit(node: Expr) -> None:
        if node in found:
            return
        for child in _children(node):
            visit(child)
        found[node] = _interval(node, found.__getitem__, problem)

    for expr in exprs:
        if expr is not None:
            visit(expr)
    return found


@dataclass(frozen=True)
class Excess:
    """A value of an expression past its allowed range: one the hook takes (`witnessed`), or the bound of its
    interval where the grid is too large to evaluate."""

    value: int | float
    witnessed: bool


def excess(node: Expr, interval: Interval, problem: Problem, low: float, high: float) -> Excess | None:
    """A value of `node` over `problem` outside [low, high], or None where every value lies inside."""
    if within(interval, low, high):
        return None
    on_edges = _outside(_edge_bounds(node, problem), low, high)
    if on_edges is not None:
        return Excess(on_edges, witnessed=True)
    if _grid_elements(node, problem) > GRID_LIMIT_ELEMENTS:
        return Excess(_outside(interval, low, high), witnessed=False)
    on_grid = _outside(exact_bounds(node, problem), low, high)
    return None if on_grid is None else Excess(on_grid, witnessed=True)


def _outside(bounds: Interval, low: float, high: float) -> int | float | None:
    """The bound of `bounds` past [low, high] (the upper first), or None."""
    if bounds[1] > high:
        return bounds[1]
    if bounds[0] < low:
        return bounds[0]
    return None


def _children(node: Expr) -> tuple[Expr, ...]:
    if node.op == "gather":
        return node.args[1]
    return tuple(arg for arg in node.args if isinstance(arg, Expr))


def exact_bounds(node: Expr, problem: Problem) -> Interval:
    """The least and greatest value `node` takes over `problem`'s index grid, evaluated in chunks of query rows
    with torch's dtypes and the kernel's float-to-int conversion."""
    low, high = math.inf, -math.inf
    for values in _grid_values(node, problem):
        chunk_low, chunk_high = _value_bounds(values)
        low, high = min(low, chunk_low), max(high, chunk_high)
    return (low, high)


def takes_zero(node: Expr, interval: Interval, problem: Problem) -> Excess | None:
    """0 where `node` may be 0 over `problem`: witnessed on the grid's edges or on the whole grid, or (a grid past
    GRID_LIMIT_ELEMENTS) because its interval holds 0; None where it never is."""
    if not interval[0] <= 0 <= interval[1]:
        return None
    if bool((_edge_values(node, problem) == 0).any()):
        return Excess(0, witnessed=True)
    if _grid_elements(node, problem) > GRID_LIMIT_ELEMENTS:
        return Excess(0, witnessed=False)
    if any(bool((values == 0).any()) for values in _grid_values(node, problem)):
        return Excess(0, witnessed=True)
    return None


def _grid_values(node: Expr, problem: Problem):
    """`node`'s values over `problem`'s index grid, one chunk of query rows at a time."""
    batch, heads, seqlen_q, seqlen_kv = problem.shape
    reads = node.leaves()
    captures = {name: tensor.to(problem.device) for name, tensor in problem.captures.items() if name in reads}
    extents = {"b": batch, "h": heads, "q_idx": seqlen_q, "kv_idx": seqlen_kv}
    row_elements = math.prod(extent for name, extent in extents.items() if name in reads and name != "q_idx")
    rows = seqlen_q if "q_idx" not in reads else max(1, GRID_CHUNK_ELEMENTS // row_elements)
    for start in range(0, seqlen_q if "q_idx" in reads else 1, rows):
        env = captures | _grid(problem, start, min(seqlen_q, start + rows))
        yield evaluate(node, env, kernel_casts=True)


def _edge_bounds(node: Expr, problem: Problem) -> Interval:
    """The least and greatest value `node` takes where each index is among the first, middle and last of its
    dimension: where most hooks take their extremes."""
    return _value_bounds(_edge_values(node, problem))


def _edge_values(node: Expr, problem: Problem) -> torch.Tensor:
    """`node`'s values where each index is among the first, middle and last of its dimension."""
    def edges(extent: int) -> list[int]:
        return sorted({index for index in (0, 1, 2, extent // 2, extent - 3, extent - 2, extent - 1)
                       if 0 <= index < extent})

    env = {name: tensor.to(problem.device) for name, tensor in problem.captures.items() if name in node.leaves()}
    for axis, (name, extent) in enumerate(zip(("b", "h", "q_idx", "kv_idx"), problem.shape)):
        view = [1, 1, 1, 1]
        view[axis] = -1
        env[name] = torch.tensor(edges(extent), device=problem.device).view(view)
    return evaluate(node, env, kernel_casts=True)


def _grid_elements(node: Expr, problem: Problem) -> int:
    reads = node.leaves()
    return math.prod(extent for name, extent in zip(("b", "h", "q_idx", "kv_idx"), problem.shape) if name in reads)


def _value_bounds(values: torch.Tensor) -> Interval:
    if values.is_floating_point() and bool(torch.isnan(values).any()):
        return UNKNOWN
    low, high = torch.aminmax(values.double() if values.is_floating_point() else values.long())
    return (low.item(), high.item())


def _grid(problem: Problem, q_start: int, q_stop: int) -> dict[str, torch.Tensor]:
    """Broadcastable int64 index tensors for query rows [q_start, q_stop)."""
    batch, heads, _, seqlen_kv = problem.shape
    device = problem.device
    return {
        "b": torch.arange(batch, device=device).view(-1, 1, 1, 1),
        "h": torch.arange(heads, device=device).view(1, -1, 1, 1),
        "q_idx": torch.arange(q_start, q_stop, device=device).view(1, 1, -1, 1),
        "kv_idx": torch.arange(seqlen_kv, device=device).view(1, 1, 1, -1),
    }


def within(interval: Interval, low: float, high: float) -> bool:
    return low <= interval[0] and interval[1] <= high


def _interval(node: Expr, visit: Callable[[Expr], Interval], problem: Problem) -> Interval:
    """`node`'s interval from its operands' (`visit`: their intervals, already found)."""
    op = node.op
    if op == "arg":
        return problem.argument(node.args[0])
    if op == "const":
        value = node.args[0]
        return (float(value), float(value)) if node.kind == FLOAT else (int(value), int(value))
    if node.kind == BOOL:
        return (0, 1)
    if op == "gather":
        return problem.table(node.args[0])
    if op == "select":
        (true_low, true_high), (false_low, false_high) = visit(node.args[1]), visit(node.args[2])
        return (min(true_low, false_low), max(true_high, false_high))
    if op == "cast":
        low, high = visit(node.args[0])
        if node.kind == INT and node.args[0].kind == FLOAT:  # the GPU's conversion truncates and saturates
            return (_saturated(low - _rounding_slack(low)), _saturated(high + _rounding_slack(high)))
        return (low, high)
    if len(node.args) == 1:
        return _unary(op, visit(node.args[0]))
    lhs, rhs = node.args
    if op == "mul" and lhs == rhs:
        low, high = _unary("abs", visit(lhs))
        return _checked((low * low, high * high))
    return _binary(op, visit(lhs), visit(rhs), integer=node.kind == INT)


def _rounding_slack(value: float) -> float:
    """How far float32 arithmetic may land from the real-number bound `value` (the intervals are taken in float64
    on real numbers; the kernel rounds every float op to float32): a relative 2^-16 and an absolute 2^-16, many
    roundings' worth, so that a truncation to an integer never lands past the interval's."""
    return abs(value) * 2.0**-16 + 2.0**-16 if math.isfinite(value) else 0.0


def _saturated(value: float) -> int:
    """`value` converted as cvt.rzi.s32.f32 does: truncated, infinities and values past the range saturated."""
    if math.isinf(value):
        return INT32_MIN if value < 0 else INT32_MAX
    return min(INT32_MAX, max(INT32_MIN, math.trunc(value)))


def _unary(op: str, operand: Interval) -> Interval:
    low, high = operand
    if op == "neg":
        return (-high, -low)
    if op == "abs":
        if low >= 0:
            return (low, high)
        if high <= 0:
            return (-high, -low)
        return (0, max(-low, high))
    if op in ("sin", "cos"):
        return (-1.0, 1.0)
    if op == "cosh":  # even: non-decreasing in |x|
        return _monotone(math.cosh, _unary("abs", operand))
    if op == "tan":
        return _tangent(operand)
    if op in _MONOTONE:
        return _monotone(_MONOTONE[op], operand)
    return UNKNOWN


def _monotone(function: Callable[[float], float], operand: Interval) -> Interval:
    """The interval of a monotone `function` of `operand`: its values at the ends, in order."""
    try:
        ends = _checked((_applied(function, operand[0]), _applied(function, operand[1])))
    except (ValueError, OverflowError):  # outside the function's domain (log of a negative): no bound
        return UNKNOWN
    return (min(ends), max(ends))


def _tangent(operand: Interval) -> Interval:
    """tan increases between its poles (pi/2 + k pi): bounded where the operand stays between two poles with
    float32 rounding's slack on each side (beside a pole, the rounding of the operand moves tan without bound)."""
    low, high = operand
    low, high = low - _rounding_slack(low), high + _rounding_slack(high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return UNKNOWN
    if math.floor(low / math.pi + 0.5) != math.floor(high / math.pi + 0.5):  # a pole in between
        return UNKNOWN
    return (math.tan(low), math.tan(high))


def _applied(function: Callable[[float], float], value: float) -> float:
    if math.isinf(value) and function in _ROUNDINGS:
        return value
    if value == 0 and function is math.log:
        return -math.inf
    return function(value)


def _binary(op: str, lhs: Interval, rhs: Interval, integer: bool) -> Interval:
    """The interval of `lhs op rhs`; `integer`: of integer operands (a remainder's bound is the divisor's less 1)."""
    (a, b), (c, d) = lhs, rhs
    if op == "add":
        return _checked((a + c, b + d))
    if op == "sub":
        return _checked((a - d, b - c))
    if op == "mul":
        return _corners(lambda x, y: x * y, lhs, rhs)
    if op in ("min", "fmin"):
        return (min(a, c), min(b, d))
    if op in ("max", "fmax"):
        return (max(a, c), max(b, d))
    if op in ("div", "floordiv", "truncdiv", "ceildiv"):
        if c <= 0 <= d:
            return UNKNOWN
        rounding = {"div": float, "floordiv": math.floor, "truncdiv": math.trunc, "ceildiv": math.ceil}[op]
        quotient = _corners(lambda x, y: x / y, lhs, rhs)
        return quotient if quotient == UNKNOWN else (_applied(rounding, quotient[0]), _applied(rounding, quotient[1]))
    step = 1 if integer else 0  # how far a remainder stays inside its divisor's bound
    if op == "mod":  # torch.remainder: the sign of the divisor
        if c > 0:
            return (a, b) if a >= 0 and b < c else (0, d - step)
        if d < 0:
            return (c + step, 0)
        return UNKNOWN
    if op == "fmod":  # torch.fmod: the sign of the dividend, below the divisor in magnitude
        if c <= 0 <= d:
            return UNKNOWN
        least, most = sorted((abs(c), abs(d)))
        if -least < a and b < least:
            return (a, b)
        return (max(min(a, 0), step - most), min(max(b, 0), most - step))
    if op == "atan2":  # the angle of (rhs, lhs): in [-pi, pi], of the sign of lhs where it is nonzero
        return (0.0, math.pi) if a > 0 else (-math.pi, 0.0) if b < 0 else (-math.pi, math.pi)
    if op == "copysign":  # |lhs| with rhs's sign bit (a zero of rhs's interval may be -0.0)
        low, high = _unary("abs", lhs)
        return (low, high) if c > 0 else (-high, -low) if d < 0 else (-high, high)
    if op in ("shl", "shr"):
        if c < 0 or math.isinf(d):
            return UNKNOWN
        if op == "shl":
            return _corners(lambda x, y: x * 2**y, lhs, rhs)
        return _corners(lambda x, y: math.floor(x / 2**y), lhs, rhs)
    if op == "bitand" and (a >= 0 or c >= 0):
        return (0, min(high for low, high in (lhs, rhs) if low >= 0))
    if op in ("bitor", "bitxor") and a >= 0 and c >= 0 and not math.isinf(max(b, d)):
        return (0, 2 ** int(max(b, d)).bit_length() - 1)
    if op == "pow" and c == d and float(c).is_integer() and c >= 0:
        exponent = int(c)
        if exponent % 2 == 0:
            low, high = _unary("abs", lhs)
            return _checked((low**exponent, high**exponent))
        return _checked((a**exponent, b**exponent))
    return UNKNOWN


def _corners(function: Callable[[float, float], float], lhs: Interval, rhs: Interval) -> Interval:
    """The least and greatest of `function` at the intervals' corners: the bounds of an operation monotone in
    each argument where the other keeps its sign."""
    try:
        values = [function(x, y) for x in lhs for y in rhs]
    except (OverflowError, ZeroDivisionError):
        return UNKNOWN
    return _checked((min(values), max(values)))


def _checked(interval: Interval) -> Interval:
    """`interval`, or no bound where it came out NaN (infinity times zero)."""
    return UNKNOWN if any(isinstance(v, float) and math.isnan(v) for v in interval) else interval
