"""Scalar CuIR (arith, math, `cuir.gather`, `cuir.dim`) as CUDA C++ statements.

`SliceEmitter` writes the backward slice of some IR values as one
`const T name = ...;` statement per op (one per distinct expression: every
statement is pure), in dataflow order, stopping at leaves
(values the caller binds to C++ expressions: hook arguments, tile
coordinates, kernel parameters). Each statement of an op the transfer
inserted ends with the spec line it came from (`// spec.py:12`). Special
functions map to the device primitives of cubridge/math.cuh (`math.tanh` to
`fast_tanh`, `math.exp2` to `fast_exp2`); an op with no C++ here is a located
`CuBridgeError`, never dropped.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from cubridge.dialect.cuir import DimOp, GatherOp
from cubridge.dialect.types import GlobalTensorType
from cubridge.diagnostics import CuBridgeError, describe_location, location_of

_INT_BINARY = {
    arith.AddiOp: "{} + {}",
    arith.SubiOp: "{} - {}",
    arith.MuliOp: "{} * {}",
    arith.DivSIOp: "{} / {}",
    arith.RemSIOp: "{} % {}",
    arith.DivUIOp: "static_cast<int>(static_cast<unsigned>({}) / static_cast<unsigned>({}))",
    arith.RemUIOp: "static_cast<int>(static_cast<unsigned>({}) % static_cast<unsigned>({}))",
    arith.FloorDivSIOp: "floor_div({}, {})",
    arith.CeilDivSIOp: "ceil_div({}, {})",
    arith.CeilDivUIOp: "ceil_div({}, {})",
    arith.MinSIOp: "min({}, {})",
    arith.MaxSIOp: "max({}, {})",
    arith.AndIOp: "{} & {}",
    arith.OrIOp: "{} | {}",
    arith.XOrIOp: "{} ^ {}",
    arith.ShLIOp: "{} << {}",
    arith.ShRSIOp: "{} >> {}",
}
_FLOAT_BINARY = {
    arith.AddfOp: "{} + {}",
    arith.SubfOp: "{} - {}",
    arith.MulfOp: "{} * {}",
    arith.MaximumfOp: "fmaxf({}, {})",
    arith.MinimumfOp: "fminf({}, {})",
    arith.MaxnumfOp: "fmaxf({}, {})",
    arith.MinnumfOp: "fminf({}, {})",
    mathd.PowFOp: "powf({}, {})",
    mathd.Atan2Op: "atan2f({}, {})",
    mathd.CopySignOp: "copysignf({}, {})",
}
_FLOAT_UNARY = {
    arith.NegfOp: "-{}",
    mathd.TanhOp: "fast_tanh({})",
    mathd.Exp2Op: "fast_exp2({})",
    mathd.ExpOp: "fast_exp2({} * 1.44269504f)",
    mathd.LogOp: "__logf({})",
    mathd.SqrtOp: "sqrtf({})",
    mathd.AbsFOp: "fabsf({})",
    mathd.TanOp: "tanf({})",
    mathd.AsinOp: "asinf({})",
    mathd.AcosOp: "acosf({})",
    mathd.AtanOp: "atanf({})",
    mathd.SinhOp: "sinhf({})",
    mathd.CoshOp: "coshf({})",
    mathd.RoundEvenOp: "rintf({})",  # to nearest, ties to even
}
_OPTIONAL_FLOAT_UNARY = {
    "ErfOp": "erff({})",
    "SinOp": "accurate_sin({})",
    "CosOp": "accurate_cos({})",
    "FloorOp": "floorf({})",
    "CeilOp": "ceilf({})",
    "TruncOp": "truncf({})",
    "RsqrtOp": "rsqrtf({})",
    "Log2Op": "__log2f({})",
}
for _name, _pattern in _OPTIONAL_FLOAT_UNARY.items():
    if hasattr(mathd, _name):
        _FLOAT_UNARY[getattr(mathd, _name)] = _pattern
# The functions above that run on the MUFU (the special-function unit the softmax's exp2 shares; the libm ones
# call its rcp, rsqrt or ex2)
MUFU_FUNCTIONS = ("fast_tanh", "fast_exp2", "__logf", "accurate_sin", "accurate_cos", "rsqrtf", "__log2f", "tanf",
                  "asinf", "acosf", "atanf", "atan2f", "sinhf", "coshf")
_CASTS = arith.IndexCastOp | arith.ExtUIOp | arith.ExtSIOp | arith.TruncIOp | arith.FPToSIOp
_INT_PREDICATES = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")  # arith.cmpi eq..uge
_UNSIGNED_PREDICATES = (6, 7, 8, 9)
_FLOAT_PREDICATES = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 6: "!=", 8: "==", 9: ">", 10: ">=", 11: "<",
                     12: "<=", 13: "!="}


def cxx_type(kind: Attribute) -> str:
    """The C++ type of a scalar IR type: index and i32 -> int, i1 -> bool, f32 -> float."""
    if isinstance(kind, IndexType):
        return "int"
    if isinstance(kind, IntegerType):
        return "bool" if kind.width.data == 1 else "int"
    return "float"


def float_literal(value: float) -> str:
    """A float literal that reads back as exactly the f32 `value`."""
    if math.isinf(value):
        return "(-__builtin_huge_valf())" if value < 0 else "__builtin_huge_valf()"
    if math.isnan(value):
        return "__int_as_float(0x7fffffff)"
    single = struct.unpack("f", struct.pack("f", value))[0]
    return f"{single!r}f" if "e" in repr(single) or "." in repr(single) else f"{single!r}.0f"


def table_type(kind: GlobalTensorType) -> str:
    """The C++ type of a captured-tensor or block-list kernel argument."""
    element = "float" if cxx_type(kind.element_type) == "float" else "int"
    return f"Table<{element}, {kind.rank.data}>"


class SliceEmitter:
    """Emits the ops that compute some values from `leaves` (value -> C++ expression).

    `reference_file` is the IR file the untransferred program came from: ops
    located elsewhere were inserted by the transfer, and their statements say
    where (`// spec.py:12`). `dims` maps (kernel argument name, dimension) of a
    `cuir.dim` to a C++ expression; `tables` maps captured-tensor arguments to
    theirs. `seam` names the C++ function being written, for errors.
    """

    def __init__(
        self,
        leaves: dict[SSAValue, str],
        *,
        seam: str,
        reference_file: str | None,
        dims: Callable[[DimOp], str],
        tables: dict[SSAValue, str],
    ):
        self.names: dict[SSAValue, str] = dict(leaves)
        self.seam = seam
        self.reference_file = reference_file
        self.dims = dims
        self.tables = tables
        self.statements: list[str] = []
        self.taken: set[str] = set(leaves.values())
        self.declared: dict[tuple[str, str], str] = {}  # (C++ type, expression) -> the name it was declared as
        self.reads_tables = False  # whether a statement loads from a table (global memory)

    def value(self, value: SSAValue) -> str:
        """The C++ expression of `value`, emitting the statements it needs first."""
        if value in self.names:
            return self.names[value]
        if isinstance(value, BlockArgument):
            owner = value.owner.parent_op()
            raise CuBridgeError(
                f"lower: {self.seam} reads argument {value.index} of the region of {owner.name}, "
                "which the reference kernel does not pass to it",
                describe_location(owner) if owner is not None else None,
            )
        op = value.owner
        if self._is_noop_cast(op):
            self.names[value] = self.value(op.operands[0])  # i32 <-> index: one C++ int
            return self.names[value]
        expression = self._expression(op)
        if isinstance(op, arith.ConstantOp):
            self.names[value] = expression
            return expression
        declared = (cxx_type(value.type), expression)
        if declared in self.declared:  # the same pure expression again (the IR computed it twice): one statement
            self.names[value] = self.declared[declared]
            return self.names[value]
        name = self._fresh(value)
        comment = self._origin(op)
        self.statements.append(f"const {declared[0]} {name} = {expression};{comment}")
        self.names[value] = self.declared[declared] = name
        return name

    def _fresh(self, value: SSAValue) -> str:
        hint = self._hint(value)
        # the printer's `_N` suffixes of repeated names would make clones of one map read differently
        base = re.sub(r"\W", "_", re.sub(r"_\d+$", "", hint)) if hint else "v"
        name, index = base, 0
        while name in self.taken or not name.isidentifier():
            index += 1
            name = f"{base}{index}"
        self.taken.add(name)
        return name

    def _hint(self, value: SSAValue) -> str | None:
        """The IR's name for `value`, else that of a cast that leaves it as it is (an i32 table read made an
        index), whose statement is this one."""
        return value.name_hint or next((use.operation.results[0].name_hint for use in value.uses
                                        if self._is_noop_cast(use.operation) and use.operation.results[0].name_hint),
                                       None)

    @staticmethod
    def _is_noop_cast(op: Operation) -> bool:
        """A cast between IR types that are the same C++ type (i32 and index)."""
        return isinstance(op, _CASTS) and cxx_type(op.operands[0].type) == cxx_type(op.results[0].type)

    def _origin(self, op: Operation) -> str:
        where = location_of(op)
        if where is None or where.filename == self.reference_file:
            return ""
        return f"  // {where.filename.rsplit('/', 1)[-1]}:{where.line}"

    def _expression(self, op: Operation) -> str:
        operands = [self.value(operand) for operand in self._value_operands(op)]
        kind = type(op)
        if isinstance(op, arith.ConstantOp):
            return self._constant(op)
        if isinstance(op, DimOp):
            return self.dims(op)
        if isinstance(op, GatherOp):
            table = self.tables.get(op.source)
            if table is None:
                raise CuBridgeError(f"lower: {self.seam} gathers from a tensor that is no captured input",
                                    describe_location(op))
            self.reads_tables = True
            return f"gather({table}, {', '.join(operands)})"
        if isinstance(op, arith.SelectOp):
            return f"{operands[0]} ? {operands[1]} : {operands[2]}"
        if isinstance(op, arith.CmpiOp):
            predicate = op.predicate.value.data
            if predicate in _UNSIGNED_PREDICATES:
                operands = [f"static_cast<unsigned>({x})" for x in operands]
            return f"{operands[0]} {_INT_PREDICATES[predicate]} {operands[1]}"
        if isinstance(op, arith.CmpfOp):
            predicate = op.predicate.value.data
            if predicate not in _FLOAT_PREDICATES:
                raise self._unsupported(op, f"predicate {predicate}")
            return f"{operands[0]} {_FLOAT_PREDICATES[predicate]} {operands[1]}"
        if isinstance(op, _CASTS):
            return f"static_cast<{cxx_type(op.results[0].type)}>({operands[0]})"  # float to int truncates, as torch
        if isinstance(op, arith.SIToFPOp):
            return f"static_cast<float>({operands[0]})"
        if isinstance(op, arith.DivfOp):
            return self._division(op, operands)
        if kind in _INT_BINARY:
            if isinstance(op.results[0].type, IntegerType) and op.results[0].type.width.data == 1:
                return {arith.AndIOp: "{} && {}", arith.OrIOp: "{} || {}", arith.XOrIOp: "{} != {}"}[
                    kind
                ].format(*operands)
            return _INT_BINARY[kind].format(*operands)
        if isinstance(op, mathd.AbsIOp):
            return f"abs({operands[0]})"
        if kind in _FLOAT_BINARY:
            return _FLOAT_BINARY[kind].format(*operands)
        if kind in _FLOAT_UNARY:
            return _FLOAT_UNARY[kind].format(*operands)
        raise self._unsupported(op)

    @staticmethod
    def _value_operands(op: Operation) -> list[SSAValue]:
        if isinstance(op, GatherOp):
            return list(op.indices)
        if isinstance(op, DimOp):
            return []
        return list(op.operands)

    def _constant(self, op: arith.ConstantOp) -> str:
        value = op.value
        if isinstance(value, FloatAttr):
            return float_literal(value.value.data)
        if isinstance(value, IntegerAttr):
            number = value.value.data
            if isinstance(value.type, IntegerType) and value.type.width.data == 1:
                return "true" if number else "false"
            return str(number) if number >= 0 else f"({number})"
        raise self._unsupported(op, "a constant of this type")

    def _division(self, op: arith.DivfOp, operands: list[str]) -> str:
        """x / c becomes x * (1 / c) for a constant c (within an ulp); other divisions use the fast divide."""
        divisor = op.rhs.owner
        if isinstance(divisor, arith.ConstantOp) and isinstance(divisor.value, FloatAttr):
            constant = divisor.value.value.data
            if constant != 0.0 and math.isfinite(constant):
                return f"{operands[0]} * {float_literal(1.0 / constant)}"
        return f"__fdividef({operands[0]}, {operands[1]})"

    def _unsupported(self, op: Operation, what: str | None = None) -> CuBridgeError:
        detail = f" ({what})" if what else ""
        return CuBridgeError(f"lower: {self.seam} has no CUDA for {op.name}{detail}", describe_location(op))


def uses_mufu(statements) -> bool:
    """Whether C++ `statements` emitted here call a MUFU function."""
    return any(f"{name}(" in statement for statement in statements for name in MUFU_FUNCTIONS)
