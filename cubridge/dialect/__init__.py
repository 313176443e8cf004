"""The CuIR dialect: types in `types`, operations in `cuir`."""

from cubridge.dialect.cuir import CuIR

__all__ = ["CuIR"]
