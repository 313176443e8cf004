"""Scalar expressions traced from score_mod/mask_mod hooks.

An `Expr` is an immutable node of a small expression DAG: leaves are the
hook arguments (`score`, `b`, `h`, `q_idx`, `kv_idx`), constants and reads of
captured tensors; inner nodes are elementwise arithmetic, comparisons, boolean
logic and math functions. Every node has a kind: `float`, `int` or `bool`.
Structural equality makes equal subexpressions share one node when emitted;
a node's `line` (the spec line it was traced from) takes no part in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

FLOAT, INT, BOOL = "float", "int", "bool"

HOOK_ARGUMENTS = {"score": FLOAT, "b": INT, "h": INT, "q_idx": INT, "kv_idx": INT}

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC = ("and", "or")
FLOAT_RESULTS = ("div", "atan2", "copysign")  # float on integer operands too, as torch promotes them


@dataclass(frozen=True)
class Expr:
    """One node: `op` applied to `args` (Exprs, or the payload of a leaf); `line`:
    the spec line the node was traced from, if any."""

    op: str
    args: tuple
    kind: str
    line: int | None = field(default=None, compare=False, hash=False)

    def leaves(self) -> set[str]:
        """Names of the hook arguments and captured tensors this expression reads."""
        if self.op == "arg":
            return {self.args[0]}
        if self.op == "gather":
            name, indices = self.args
            return {name}.union(*(index.leaves() for index in indices))
        return set().union(*(arg.leaves() for arg in self.args if isinstance(arg, Expr)))


def argument(name: str, kind: str = INT) -> Expr:
    return Expr("arg", (name,), kind)


def constant(value: bool | int | float) -> Expr:
    if isinstance(value, bool):
        return Expr("const", (value,), BOOL)
    if isinstance(value, int):
        return Expr("const", (value,), INT)
    return Expr("const", (float(value),), FLOAT)


def const_value(expr: Expr) -> bool | int | float | None:
    return expr.args[0] if expr.op == "const" else None


def arithmetic_kind(op: str, lhs: Expr, rhs: Expr) -> str:
    if op in FLOAT_RESULTS or FLOAT in (lhs.kind, rhs.kind):
        return FLOAT
    return INT


def binary(op: str, lhs: Expr, rhs: Expr) -> Expr:
    if op in COMPARISONS:
        return Expr(op, (lhs, rhs), BOOL)
    if op in LOGIC:
        return Expr(op, (lhs, rhs), BOOL)
    return Expr(op, (lhs, rhs), arithmetic_kind(op, lhs, rhs))


def unary(op: str, operand: Expr) -> Expr:
    if op == "not":
        return Expr("not", (operand,), BOOL)
    if op in ("neg", "abs"):
        return Expr(op, (operand,), operand.kind)
    return Expr(op, (operand,), FLOAT)


def cast(operand: Expr, kind: str) -> Expr:
    """`operand` converted to `kind` as torch converts dtypes (float to int truncates;
    to bool is `!= 0`)."""
    if operand.kind == kind:
        return operand
    if operand.op == "const":
        return constant({FLOAT: float, INT: int, BOOL: bool}[kind](operand.args[0]))
    return Expr("cast", (operand,), kind)


def select(condition: Expr, if_true: Expr, if_false: Expr) -> Expr:
    kind = FLOAT if FLOAT in (if_true.kind, if_false.kind) else if_true.kind
    return Expr("select", (condition, if_true, if_false), kind)


def gather(name: str, indices: tuple[Expr, ...], kind: str) -> Expr:
    """A read of captured tensor `name` at one index per dimension."""
    return Expr("gather", (name, indices), kind)


def with_line(expr: Expr, line: int | None) -> Expr:
    """`expr` with `line` on every node that has none yet (hook arguments stay bare)."""
    if line is None or expr.line is not None or expr.op == "arg":
        return expr
    args = tuple(_with_line_arg(arg, line) for arg in expr.args)
    return replace(expr, args=args, line=line)


def _with_line_arg(arg, line: int):
    if isinstance(arg, Expr):
        return with_line(arg, line)
    if isinstance(arg, tuple):
        return tuple(_with_line_arg(a, line) for a in arg)
    return arg


def evaluate(expr: Expr, env: dict[str, torch.Tensor], kernel_casts: bool = False) -> torch.Tensor:
    """Evaluate `expr` elementwise on broadcastable tensors (`env`: leaves by name), with torch's dtypes as the
    traced hook had them: index values made floats are float32 (a T5 bucket `(log(d / 8) / log(16) * 8).long()`
    truncates as the hook does), a float64 score stays float64. With `kernel_casts` a float made an integer
    saturates to the 32-bit int as the kernel's conversion does (cvt.rzi.s32.f32: -inf the least int, NaN 0)
    instead of taking int64's value. Constants are made on the leaves' device: torch.logical_and and
    torch.logical_or refuse a CPU scalar before a GPU tensor."""
    memo: dict[Expr, torch.Tensor] = {}
    device = next((value.device for value in env.values() if isinstance(value, torch.Tensor)), None)
    casts = _CASTS | {INT: _saturated_int} if kernel_casts else _CASTS

    def visit(node: Expr) -> torch.Tensor:
        if node not in memo:
            memo[node] = _evaluate_node(node, visit, env, device, casts)
        return memo[node]

    try:
        return visit(expr)
    finally:  # `visit` refers to itself: only the cycle collector would free the intermediates
        memo.clear()


def _evaluate_node(node: Expr, visit, env: dict[str, torch.Tensor], device: torch.device | None,
                   casts: dict) -> torch.Tensor:
    op = node.op
    if op == "arg":
        return env[node.args[0]]
    if op == "const":
        # a fill on the device, not a copy from the host: a CUDA graph capture allows the first only
        value = node.args[0]
        return torch.full((), value, dtype=torch.tensor(value).dtype, device=device)
    if op == "gather":
        name, indices = node.args
        return env[name][tuple(visit(i).long() for i in indices)]
    args = [visit(a) for a in node.args]
    if op == "select":
        return torch.where(*args)
    if op == "cast":
        return casts[node.kind](args[0])
    if len(args) == 1:
        return _UNARY_EVAL[op](args[0])
    lhs, rhs = args
    if op == "div":
        return torch.true_divide(lhs, rhs)
    return _BINARY_EVAL[op](lhs, rhs)


_UNARY_EVAL = {
    "not": torch.logical_not,
    "neg": torch.neg,
    "abs": torch.abs,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "log": torch.log,
    "sigmoid": torch.sigmoid,
    "sqrt": torch.sqrt,
    "erf": torch.erf,
    "sin": torch.sin,
    "cos": torch.cos,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "round": torch.round,
    "atan": torch.atan,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
}

_CASTS = {
    FLOAT: lambda value: value.float(),  # from an integer or a boolean: float32, as `.float()` and `/` give
    INT: lambda value: value.long(),
    BOOL: lambda value: value != 0,
}


def _saturated_int(value: torch.Tensor) -> torch.Tensor:
    if not value.is_floating_point():
        return value.long()
    return torch.nan_to_num(value.double().trunc(), nan=0.0).clamp(-(2**31), 2**31 - 1).long()


_BINARY_EVAL = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "floordiv": torch.floor_divide,
    "ceildiv": lambda a, b: -torch.floor_divide(-a, b),
    "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "mod": torch.remainder,
    "fmod": torch.fmod,
    "bitand": torch.bitwise_and,
    "bitor": torch.bitwise_or,
    "bitxor": torch.bitwise_xor,
    "shl": torch.bitwise_left_shift,
    "shr": torch.bitwise_right_shift,
    "pow": torch.pow,
    "min": torch.minimum,
    "max": torch.maximum,
    "fmin": torch.fmin,
    "fmax": torch.fmax,
    "atan2": torch.atan2,
    "copysign": torch.copysign,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "eq": torch.eq,
    "ne": torch.ne,
    "and": torch.logical_and,
    "or": torch.logical_or,
}
