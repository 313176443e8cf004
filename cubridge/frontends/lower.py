"""Lower traced `Expr`s to scalar IR: arith and math ops, and `cuir.gather`.

Kinds map to types: `float` to f32, `int` to index, `bool` to i1. Mixed
operands are promoted as torch promotes them (bool < int < float). Given the
spec's path, the ops emitted for a node traced from a spec line carry that
line as their location.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute
from xdsl.ir import Operation, SSAValue

from cubridge.dialect.cuir import GatherOp
from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr, const_value

_KIND_ORDER = (BOOL, INT, FLOAT)
_FLOAT_BINARY = {
    "add": arith.AddfOp,
    "sub": arith.SubfOp,
    "mul": arith.MulfOp,
    "div": arith.DivfOp,
    "min": arith.MinimumfOp,
    "max": arith.MaximumfOp,
    "fmin": arith.MinnumfOp,
    "fmax": arith.MaxnumfOp,
    "pow": mathd.PowFOp,
    "atan2": mathd.Atan2Op,
    "copysign": mathd.CopySignOp,
}
# floor(a / b), ceil(a / b), trunc(a / b) on floats: the rounding of the quotient
_DIVISION_ROUNDING = {"floordiv": "floor", "ceildiv": "ceil", "truncdiv": "trunc"}
_INT_BINARY = {
    "add": arith.AddiOp,
    "sub": arith.SubiOp,
    "mul": arith.MuliOp,
    "floordiv": arith.FloorDivSIOp,
    "ceildiv": arith.CeilDivSIOp,
    "truncdiv": arith.DivSIOp,
    "fmod": arith.RemSIOp,
    "min": arith.MinSIOp,
    "max": arith.MaxSIOp,
    "fmin": arith.MinSIOp,
    "fmax": arith.MaxSIOp,
    "bitand": arith.AndIOp,
    "bitor": arith.OrIOp,
    "bitxor": arith.XOrIOp,
    "shl": arith.ShLIOp,
    "shr": arith.ShRSIOp,
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
    "erf": mathd.ErfOp,
    "sin": mathd.SinOp,
    "cos": mathd.CosOp,
    "tan": mathd.TanOp,
    "asin": mathd.AsinOp,
    "acos": mathd.AcosOp,
    "atan": mathd.AtanOp,
    "sinh": mathd.SinhOp,
    "cosh": mathd.CoshOp,
    "round": mathd.RoundEvenOp,
}


class ScalarLowering:
    """Emits the ops of Exprs through `insert`, reusing equal subexpressions.

    `leaves` binds hook arguments (and any other `arg` leaves) and captured
    tensor names to SSA values. With `source` (the spec's path), the ops of a
    node that has a line get `source:line` as their location.
    """

    def __init__(
        self,
        insert: Callable[[Operation], None],
        leaves: dict[str, SSAValue],
        source: str | None = None,
    ):
        self.insert = insert
        self.leaves = leaves
        self.source = source
        self.values: dict[tuple[Expr, str], SSAValue] = {}
        self._location: Attribute = UNKNOWN_LOC

    def continued_at(self, insert: Callable[[Operation], None]) -> ScalarLowering:
        """A lowering that emits through `insert` and reuses the values emitted so far
        (`insert` must place ops where those values are visible)."""
        continued = ScalarLowering(insert, dict(self.leaves), self.source)
        continued.values = dict(self.values)
        return continued

    def lower(self, expr: Expr, kind: str | None = None) -> SSAValue:
        """The value of `expr`, converted to `kind` if given."""
        kind = kind or expr.kind
        key = (expr, kind)
        if key in self.values:
            return self.values[key]
        outer = self._location
        self._location = self._location_of(expr)
        try:
            value = self._lower_node(expr) if kind == expr.kind else self._convert(self.lower(expr), expr.kind, kind)
        finally:
            self._location = outer
        self.values[key] = value
        return value

    def _location_of(self, expr: Expr) -> Attribute:
        if self.source is None or expr.line is None:
            return UNKNOWN_LOC
        return FileLineColLoc(StringAttr(self.source), IntAttr(expr.line), IntAttr(1))

    def _emit(self, op: Operation) -> SSAValue:
        op.location = self._location
        self.insert(op)
        return op.results[0]

    def constant(self, value: bool | int | float, kind: str) -> SSAValue:
        if kind == FLOAT:
            return self._emit(arith.ConstantOp(FloatAttr(float(value), f32)))
        if kind == BOOL:
            return self._emit(arith.ConstantOp(IntegerAttr(int(value), i1)))
        return self._emit(arith.ConstantOp(IntegerAttr(int(value), IndexType())))

    def _convert(self, value: SSAValue, source: str, target: str) -> SSAValue:
        """`value` of kind `source` as `target`, with torch's dtype conversions."""
        if source == BOOL:
            return self._emit(arith.SelectOp(value, self.constant(1, target), self.constant(0, target)))
        if target == BOOL and source == INT:
            return self._emit(arith.CmpiOp(value, self.constant(0, INT), "ne"))
        if target == BOOL:
            return self._emit(arith.CmpfOp(value, self.constant(0.0, FLOAT), "une"))
        if target == FLOAT:
            wide = self._emit(arith.IndexCastOp(value, i64))
            return self._emit(arith.SIToFPOp(wide, f32))
        wide = self._emit(arith.FPToSIOp(value, i64))
        return self._emit(arith.IndexCastOp(wide, IndexType()))

    def _lower_node(self, expr: Expr) -> SSAValue:
        op = expr.op
        if op == "arg":
            return self.leaves[expr.args[0]]
        if op == "const":
            return self.constant(expr.args[0], expr.kind)
        if op == "gather":
            return self._lower_gather(expr)
        if op == "cast":
            return self.lower(expr.args[0], expr.kind)
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
        """Float tables hold f32, integer and boolean tables i32."""
        name, indices = expr.args
        value = self._emit(GatherOp(self.leaves[name], [self.lower(i, INT) for i in indices]))
        if expr.kind == FLOAT:
            return value
        index = self._emit(arith.IndexCastOp(value, IndexType()))
        return index if expr.kind == INT else self._convert(index, INT, BOOL)

    def _lower_unary(self, op: str, operand: Expr, kind: str) -> SSAValue:
        value = self.lower(operand, kind if op != "not" else BOOL)
        if op == "not":
            return self._emit(arith.XOrIOp(value, self.constant(True, BOOL)))
        if kind == INT:
            if op == "neg":
                return self._emit(arith.SubiOp(self.constant(0, INT), value))
            return self._emit(mathd.AbsIOp(value))
        if op == "sigmoid":  # 0.5 tanh(x / 2) + 0.5: one tanh on the GPU, no division
            half = self.constant(0.5, FLOAT)
            tanh = self._emit(mathd.TanhOp(self._emit(arith.MulfOp(half, value))))
            return self._emit(arith.AddfOp(self._emit(arith.MulfOp(half, tanh)), half))
        if op in ("floor", "ceil", "trunc"):
            return self._rounded(value, op)
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
        if kind == FLOAT and op in _DIVISION_ROUNDING:
            return self._rounded(self._emit(arith.DivfOp(a, b)), _DIVISION_ROUNDING[op])
        if kind == FLOAT and op == "mod":  # a - floor(a / b) * b: the sign of the divisor
            quotient = self._rounded(self._emit(arith.DivfOp(a, b)), "floor")
            return self._emit(arith.SubfOp(a, self._emit(arith.MulfOp(quotient, b))))
        if kind == FLOAT and op == "fmod":  # a - trunc(a / b) * b with the sign of the dividend (of a -0.0 too)
            quotient = self._rounded(self._emit(arith.DivfOp(a, b)), "trunc")
            remainder = self._emit(arith.SubfOp(a, self._emit(arith.MulfOp(quotient, b))))
            return self._emit(mathd.CopySignOp(remainder, a))
        if kind == FLOAT:
            return self._emit(_FLOAT_BINARY[op](a, b))
        if op == "mod":
            divisor = const_value(rhs)
            return self._floor_mod(a, b, divisor_positive=divisor is not None and divisor > 0)
        return self._emit(_INT_BINARY[op](a, b))

    def _rounded(self, value: SSAValue, rounding: str) -> SSAValue:
        """floor, ceil or trunc of a float (trunc: ceil below zero, floor above)."""
        if rounding == "floor":
            return self._emit(mathd.FloorOp(value))
        if rounding == "ceil":
            return self._emit(mathd.CeilOp(value))
        negative = self._emit(arith.CmpfOp(value, self.constant(0.0, FLOAT), "olt"))
        up, down = self._emit(mathd.CeilOp(value)), self._emit(mathd.FloorOp(value))
        return self._emit(arith.SelectOp(negative, up, down))

    def _floor_mod(self, value: SSAValue, divisor: SSAValue, divisor_positive: bool) -> SSAValue:
        """torch's `%` (the sign of the divisor) from arith.remsi (the sign of the dividend):
        a non-zero remainder whose sign differs from the divisor's gets the divisor added."""
        zero = self.constant(0, INT)
        remainder = self._emit(arith.RemSIOp(value, divisor))
        wraps = self._emit(arith.CmpiOp(remainder, zero, "slt"))
        if not divisor_positive:
            nonzero = self._emit(arith.CmpiOp(remainder, zero, "ne"))
            divisor_negative = self._emit(arith.CmpiOp(divisor, zero, "slt"))
            signs_differ = self._emit(arith.XOrIOp(wraps, divisor_negative))
            wraps = self._emit(arith.AndIOp(nonzero, signs_differ))
        wrapped = self._emit(arith.AddiOp(remainder, divisor))
        return self._emit(arith.SelectOp(wraps, wrapped, remainder))
