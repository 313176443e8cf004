"""GPU number formats in numpy: every register or memory value is held as a
float32 array whose elements are exactly representable in the declared
element type, so rounding happens where the GPU rounds (loads of rounded
inputs, `cuir.convert`, stores to narrower memory)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, IntegerType
from xdsl.ir import Attribute

_BF16_KEEP = np.uint32(0xFFFF0000)
_BF16_HALF = np.uint32(0x7FFF)
_QUIET_NAN_BIT = np.uint32(0x00400000)


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16, ties to even (as cvt.rn.bf16.f32)."""
    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + _BF16_HALF + lsb) & _BF16_KEEP
    rounded = np.where(np.isnan(values), (bits | _QUIET_NAN_BIT) & _BF16_KEEP, rounded)
    return rounded.astype(np.uint32).view(np.float32)


def round_to_f16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest float16, ties to even, held as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


def round_to_f32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def round_to_integer(values: np.ndarray) -> np.ndarray:
    """Integer elements (captured index tables) are held as int64."""
    return np.asarray(values).astype(np.int64)


def rounding_for(element_type: Attribute):
    """The function that rounds values to `element_type`."""
    if isinstance(element_type, IntegerType):
        return round_to_integer
    if isinstance(element_type, BFloat16Type):
        return round_to_bf16
    if isinstance(element_type, Float16Type):
        return round_to_f16
    if isinstance(element_type, Float32Type):
        return round_to_f32
    raise ValueError(f"no rounding to {element_type}")


def type_name(element_type: Attribute) -> str:
    """Short name of a float element type: bf16, f16 or f32."""
    if isinstance(element_type, BFloat16Type):
        return "bf16"
    if isinstance(element_type, Float16Type):
        return "f16"
    return "f32"
