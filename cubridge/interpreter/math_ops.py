"""math: elementwise functions on float32 scalars and arrays (exp2 is exact
exp2 here, where the GPU uses ex2.approx: the difference is far below the
verification tolerances)."""

from __future__ import annotations

import numpy as np
import torch
from xdsl.dialects import math
from xdsl.ir import Operation

from cubridge.interpreter.arith_ops import elementwise_step
from cubridge.interpreter.compiler import Compiler, Step, handles

def _erf(value):
    """erf in float32, on scalars and arrays (numpy has none)."""
    result = torch.erf(torch.as_tensor(value, dtype=torch.float32)).numpy()
    return result if isinstance(value, np.ndarray) else np.float32(result)


ELEMENTWISE = {
    math.AbsFOp: np.abs,
    math.AbsIOp: np.abs,
    math.ExpOp: np.exp,
    math.Exp2Op: np.exp2,
    math.ExpM1Op: np.expm1,
    math.LogOp: np.log,
    math.Log2Op: np.log2,
    math.Log10Op: np.log10,
    math.Log1pOp: np.log1p,
    math.SqrtOp: np.sqrt,
    math.RsqrtOp: lambda x: np.float32(1) / np.sqrt(x),
    math.TanhOp: np.tanh,
    math.ErfOp: _erf,
    math.SinOp: np.sin,
    math.CosOp: np.cos,
    math.TanOp: np.tan,
    math.AsinOp: np.arcsin,
    math.AcosOp: np.arccos,
    math.AtanOp: np.arctan,
    math.SinhOp: np.sinh,
    math.CoshOp: np.cosh,
    math.FloorOp: np.floor,
    math.CeilOp: np.ceil,
    math.TruncOp: np.trunc,
    math.RoundEvenOp: np.rint,
    math.PowFOp: np.power,
    math.Atan2Op: np.arctan2,
    math.CopySignOp: np.copysign,
    math.FmaOp: lambda a, b, c: a * b + c,
}


@handles(*ELEMENTWISE)
def elementwise(op: Operation, compiler: Compiler) -> Step:
    return elementwise_step(op, ELEMENTWISE[type(op)])
