"""arith: one function per op, applied alike to Python scalars (index and
control code) and to numpy arrays (`cuir.map` bodies).

Index and integer values are Python ints or int64 arrays (non-negative
where unsigned ops use them); f32 values are np.float32 scalars or float32
arrays; i1 values are bools. The lowered kernels hold every index and integer
in a 32-bit `int`: a constant, or an add, subtract, multiply or left shift
result, that leaves that range is a fault of the op (a hook's
`q_idx * 10000019` wraps on the GPU, its `2 ** 40` is truncated), and so is an
integer division or remainder by zero.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerType
from xdsl.ir import Operation

from cubridge.interpreter.compiler import Compiler, Frame, Step, handles
from cubridge.interpreter.report import KernelFault

# the lowering gives index and integer values a 32-bit `int`
_INT_RANGE = (-(2**31), 2**31 - 1)


def _select(condition, if_true, if_false):
    if isinstance(condition, np.ndarray):
        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false


def _truncating_div(a, b):
    quotient = a // b
    return quotient + ((a % b != 0) & ((a < 0) ^ (b < 0)))


def _ceil_div(a, b):
    return -((-a) // b)


def _not(value):
    return np.logical_not(value)


ELEMENTWISE = {
    arith.NegfOp: np.negative,
    arith.AddiOp: lambda a, b: a + b,
    arith.SubiOp: lambda a, b: a - b,
    arith.MuliOp: lambda a, b: a * b,
    arith.DivUIOp: lambda a, b: a // b,
    arith.DivSIOp: _truncating_div,
    arith.FloorDivSIOp: lambda a, b: a // b,
    arith.CeilDivUIOp: _ceil_div,
    arith.CeilDivSIOp: _ceil_div,
    arith.RemUIOp: lambda a, b: a % b,
    arith.RemSIOp: lambda a, b: a - _truncating_div(a, b) * b,
    arith.MinSIOp: np.minimum,
    arith.MaxSIOp: np.maximum,
    arith.MinUIOp: np.minimum,
    arith.MaxUIOp: np.maximum,
    arith.AndIOp: lambda a, b: a & b,
    arith.OrIOp: lambda a, b: a | b,
    arith.XOrIOp: lambda a, b: a ^ b,
    arith.ShLIOp: lambda a, b: a << b,
    arith.ShRUIOp: lambda a, b: a >> b,
    arith.ShRSIOp: lambda a, b: a >> b,
    arith.AddfOp: lambda a, b: a + b,
    arith.SubfOp: lambda a, b: a - b,
    arith.MulfOp: lambda a, b: a * b,
    arith.DivfOp: lambda a, b: a / b,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
}


INTEGER_PREDICATES = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b,
    "sgt": lambda a, b: a > b,
    "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a < b,
    "ule": lambda a, b: a <= b,
    "ugt": lambda a, b: a > b,
    "uge": lambda a, b: a >= b,
}

FLOAT_PREDICATES = {
    "false": lambda a, b: np.zeros(np.broadcast(a, b).shape, dtype=bool),
    "oeq": lambda a, b: a == b,
    "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b,
    "olt": lambda a, b: a < b,
    "ole": lambda a, b: a <= b,
    "one": lambda a, b: (a < b) | (a > b),
    "ord": lambda a, b: _not(np.isnan(a) | np.isnan(b)),
    "ueq": lambda a, b: _not((a < b) | (a > b)),
    "ugt": lambda a, b: _not(a <= b),
    "uge": lambda a, b: _not(a < b),
    "ult": lambda a, b: _not(a >= b),
    "ule": lambda a, b: _not(a > b),
    "une": lambda a, b: a != b,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "true": lambda a, b: np.ones(np.broadcast(a, b).shape, dtype=bool),
}


@handles(arith.ConstantOp)
def constant(op: arith.ConstantOp, compiler: Compiler) -> Step:
    """Floats of any width compute in float32, as the kernels' scalar code does."""
    attr = op.value
    if isinstance(attr, FloatAttr):
        value = np.float32(attr.value.data)
    elif isinstance(attr.type, IntegerType) and attr.type.width.data == 1:
        value = bool(attr.value.data)
    else:
        value = int(attr.value.data)
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return Step(_faulting(op, f"integer overflow: the constant {value} does not fit in the kernel's 32-bit int"))
    result = op.result

    def run(frame: Frame) -> None:
        frame.values[result] = value

    return Step(run)


def _faulting(op: Operation, message: str):
    def run(frame: Frame) -> None:
        raise KernelFault(op, message)

    return run


def elementwise_step(op: Operation, function) -> Step:
    """A step applying `function` to the op's operands (one to three of them)."""
    operands, result = list(op.operands), op.results[0]
    if len(operands) == 1:
        (a,) = operands

        def run(frame: Frame) -> None:
            values = frame.values
            values[result] = function(values[a])

    elif len(operands) == 2:
        a, b = operands

        def run(frame: Frame) -> None:
            values = frame.values
            values[result] = function(values[a], values[b])

    else:
        a, b, c = operands

        def run(frame: Frame) -> None:
            values = frame.values
            values[result] = function(values[a], values[b], values[c])

    return Step(run)


# integer ops whose value can leave the 32-bit `int`
_OVERFLOWING = (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.ShLIOp)


def _within_int(op: Operation, function):
    """`function`, faulting `op` where a value it computes does not fit in a 32-bit int."""
    low, high = _INT_RANGE

    def checked(*operands):
        value = function(*operands)
        if isinstance(value, np.ndarray):
            if not value.size:
                return value
            least, most = int(value.min()), int(value.max())
        else:
            least = most = value
        if least < low or most > high:
            reached = most if most > high else least
            raise KernelFault(op, f"integer overflow: the value {reached} does not fit in the kernel's 32-bit int")
        return value

    return checked


# integer ops that divide by their second operand
_DIVIDING = (arith.DivUIOp, arith.DivSIOp, arith.FloorDivSIOp, arith.CeilDivUIOp, arith.CeilDivSIOp, arith.RemUIOp,
             arith.RemSIOp)


def _nonzero_divisor(op: Operation, function):
    """`function`, faulting `op` where it would divide by zero (the GPU's quotient is then meaningless)."""

    def checked(dividend, divisor):
        if (divisor == 0).any() if isinstance(divisor, np.ndarray) else divisor == 0:
            raise KernelFault(op, "integer division by zero")
        return function(dividend, divisor)

    return checked


@handles(*ELEMENTWISE)
def elementwise(op: Operation, compiler: Compiler) -> Step:
    function = ELEMENTWISE[type(op)]
    if isinstance(op, _OVERFLOWING):
        function = _within_int(op, function)
    if isinstance(op, _DIVIDING):
        function = _nonzero_divisor(op, function)
    return elementwise_step(op, function)


@handles(arith.CmpiOp, arith.CmpfOp)
def compare(op: arith.CmpiOp | arith.CmpfOp, compiler: Compiler) -> Step:
    if isinstance(op, arith.CmpiOp):
        names, table = arith.CMPI_COMPARISON_OPERATIONS, INTEGER_PREDICATES
    else:
        names, table = arith.CMPF_COMPARISON_OPERATIONS, FLOAT_PREDICATES
    return elementwise_step(op, table[names[op.predicate.value.data]])


@handles(arith.SelectOp)
def select(op: arith.SelectOp, compiler: Compiler) -> Step:
    return elementwise_step(op, _select)


@handles(
    arith.IndexCastOp,
    arith.SIToFPOp,
    arith.UIToFPOp,
    arith.FPToSIOp,
    arith.FPToUIOp,
    arith.ExtFOp,
    arith.TruncFOp,
    arith.ExtSIOp,
    arith.ExtUIOp,
    arith.TruncIOp,
)
def cast(op: Operation, compiler: Compiler) -> Step:
    """Floats become float32, floats to integers truncate, integer casts keep the value."""
    source, target = op.operands[0].type, op.results[0].type
    if isinstance(target, AnyFloat):
        return elementwise_step(op, _to_float32)
    if isinstance(source, AnyFloat):
        return elementwise_step(op, _to_integer)
    return elementwise_step(op, _same)


def _to_float32(value):
    if isinstance(value, np.ndarray):
        return value.astype(np.float32)
    return np.float32(value)


def _to_integer(value):
    """Truncates and saturates to the 32-bit int as the GPU's conversion does (cvt.rzi.s32.f32: -inf is the
    least int, NaN 0)."""
    saturated = np.clip(np.nan_to_num(np.trunc(value), nan=0.0), *_INT_RANGE)
    if isinstance(value, np.ndarray):
        return saturated.astype(np.int64)
    return int(saturated)


def _same(value):
    return value
