"""Lower traced `Expr`s to scalar IR: arith and math ops, and `cuir.gather`.

Kinds map to types: `float` to f32, `int` to index, `bool` to i1. Mixed
operands are promoted as torch promotes them (bool < int < float).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    f32,
    i1,
    i64,
)
from xdsl.ir import Operation, SSAValue

from cubridge.dialect.cuir import GatherOp
from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr

_KIND_ORDER = (BOOL, INT, FLOAT)
_FLOAT_BINARY = {
    "add": arith.AddfOp,
    "sub": arith.SubfOp,
    "mul": arith.MulfOp,
    "div": arith.DivfOp,
    "min": arith.MinimumfOp,
    "max": arith.MaximumfOp,
}
_INT_BINARY = {
    "add": arith.AddiOp,
    "sub": arith.SubiOp,
    "mul": arith.MuliOp,
    "floordiv": arith.FloorDivSIOp,
    "ceildiv": arith.CeilDivSIOp,
    "min": arith.MinSIOp,
    "max": arith.MaxSIOp,
}
_INT_PREDICATES = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_FLOAT_PREDICATES = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_FLOAT_UNARY = {
    "neg": arith.NegfOp,
    "abs": mathd.AbsFOp,
    "tanh": mathd.TanhOp,
    "exp": mathd.ExpOp,
    "exp2": mathd.Exp2Op,
    "log": mathd.LogOp,
    "sqrt": mathd.SqrtOp,
}


class ScalarLowering:
    """Emits the ops of Exprs through `insert`, reusing equal subexpressions.

    `leaves` binds hook arguments (and any other `arg` leaves) and captured
    tensor names to SSA values.
    """

    def __init__(self, insert: Callable[[Operation], None], leaves: dict[str, SSAValue]):
        self.insert = insert
        self.leaves = leaves
        self.values: dict[tuple[Expr, str], SSAValue] = {}

    def continued_at(self, insert: Callable[[Operation], None]) -> ScalarLowering:
        """A lowering that emits through `insert` and reuses the values emitted so far
        (`insert` must place ops where those values are visible)."""
        continued = ScalarLowering(insert, dict(self.leaves))
        continued.values = dict(self.values)
        return continued

    def lower(self, expr: Expr, kind: str | None = None) -> SSAValue:
        """The value of `expr`, converted to `kind` if given."""
        kind = kind or expr.kind
        key = (expr, kind)
        if key not in self.values:
            value = self._lower_node(expr) if kind == expr.kind else self._convert(self.lower(expr), expr.kind, kind)
            self.values[key] = value
        return self.values[key]

    def _emit(self, op: Operation) -> SSAValue:
        self.insert(op)
        return op.results[0]

    def constant(self, value: bool | int | float, kind: str) -> SSAValue:
        if kind == FLOAT:
            return self._emit(arith.ConstantOp(FloatAttr(float(value), f32)))
        if kind == BOOL:
            return self._emit(arith.ConstantOp(IntegerAttr(int(value), i1)))
        return self._emit(arith.ConstantOp(IntegerAttr(int(value), IndexType())))

    def _convert(self, value: SSAValue, source: str, target: str) -> SSAValue:
        if source == BOOL:
            return self._emit(arith.SelectOp(value, self.constant(1, target), self.constant(0, target)))
        if source == INT and target == FLOAT:
            wide = self._emit(arith.IndexCastOp(value, i64))
            return self._emit(arith.SIToFPOp(wide, f32))
        raise ValueError(f"no implicit conversion from {source} to {target}")

    def _lower_node(self, expr: Expr) -> SSAValue:
        op = expr.op
        if op == "arg":
            return self.leaves[expr.args[0]]
        if op == "const":
            return self.constant(expr.args[0], expr.kind)
        if op == "gather":
            return self._lower_gather(expr)
        if op == "select":
            condition, if_true, if_false = expr.args
            return self._emit(
                arith.SelectOp(
                    self.lower(condition), self.lower(if_true, expr.kind), self.lower(if_false, expr.kind)
                )
            )
        if len(expr.args) == 1:
            return self._lower_unary(op, expr.args[0], expr.kind)
        return self._lower_binary(op, *expr.args, expr.kind)

    def _lower_gather(self, expr: Expr) -> SSAValue:
        name, indices, _ = expr.args
        value = self._emit(GatherOp(self.leaves[name], [self.lower(i) for i in indices]))
        if expr.kind == FLOAT:
            return value
        return self._emit(arith.IndexCastOp(value, IndexType()))

    def _lower_unary(self, op: str, operand: Expr, kind: str) -> SSAValue:
        value = self.lower(operand, kind if op != "not" else BOOL)
        if op == "not":
            return self._emit(arith.XOrIOp(value, self.constant(True, BOOL)))
        if kind == INT:
            if op == "neg":
                return self._emit(arith.SubiOp(self.constant(0, INT), value))
            return self._emit(mathd.AbsIOp(value))
        if op == "sigmoid":
            one = self.constant(1.0, FLOAT)
            exp_neg = self._emit(mathd.ExpOp(self._emit(arith.NegfOp(value))))
            return self._emit(arith.DivfOp(one, self._emit(arith.AddfOp(one, exp_neg))))
        return self._emit(_FLOAT_UNARY[op](value))

    def _lower_binary(self, op: str, lhs: Expr, rhs: Expr, kind: str) -> SSAValue:
        if op in ("and", "or"):
            make = arith.AndIOp if op == "and" else arith.OrIOp
            return self._emit(make(self.lower(lhs), self.lower(rhs)))
        if kind == BOOL:
            common = max(lhs.kind, rhs.kind, key=_KIND_ORDER.index)
            a, b = self.lower(lhs, common), self.lower(rhs, common)
            if common == FLOAT:
                return self._emit(arith.CmpfOp(a, b, _FLOAT_PREDICATES[op]))
            return self._emit(arith.CmpiOp(a, b, _INT_PREDICATES[op]))
        a, b = self.lower(lhs, kind), self.lower(rhs, kind)
        if kind == FLOAT:
            return self._emit(_FLOAT_BINARY[op](a, b))
        if op == "mod":
            return self._floor_mod(a, b)
        return self._emit(_INT_BINARY[op](a, b))

    def _floor_mod(self, value: SSAValue, divisor: SSAValue) -> SSAValue:
        """Python's `%` (the sign of the divisor) from arith.remsi (the sign of the dividend)."""
        remainder = self._emit(arith.RemSIOp(value, divisor))
        negative = self._emit(arith.CmpiOp(remainder, self.constant(0, INT), "slt"))
        wrapped = self._emit(arith.AddiOp(remainder, divisor))
        return self._emit(arith.SelectOp(negative, wrapped, remainder))
