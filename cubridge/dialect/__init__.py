"""The CuIR dialect: types in `types`, operations in `cuir`."""

from xdsl.context import Context
from xdsl.dialects import arith, builtin, math, scf

from cubridge.dialect.cuir import CuIR

__all__ = ["CuIR", "cuir_context"]


def cuir_context() -> Context:
    """A context that knows what CuIR programs use: builtin, arith, math, scf and cuir."""
    ctx = Context()
    for dialect in (builtin.Builtin, arith.Arith, math.Math, scf.Scf, CuIR):
        ctx.load_dialect(dialect)
    return ctx
