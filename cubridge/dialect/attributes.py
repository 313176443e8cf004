"""CuIR enum attributes: the closed sets of choices ops and types make.

Each prints as a bare keyword in the op or type syntax (`schedule persistent`,
`cuir.gemm_async abt ...`, `!cuir.global<4 x bf16, strided>`); the parser
rejects any other word. Ops and types take plain strings in their Python
constructors and convert them with `enum_attr`.
"""

from __future__ import annotations

from enum import auto
from typing import TypeVar

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class Schedule(StrEnum):
    """How programs are assigned work tiles (see `cuir.kernel`)."""

    GRID = auto()
    PERSISTENT = auto()
    DYNAMIC = auto()


class TileOrder(StrEnum):
    """The order in which a kernel visits its work tiles: `natural` (batch, head, then query tile), `longest_first`
    (the last query tiles of every head first), `head_by_head` (a head's query tiles last to first, head after
    head: a cluster's programs then run consecutive query tiles of one head)."""

    NATURAL = auto()
    LONGEST_FIRST = auto()
    HEAD_BY_HEAD = auto()


class GemmLayout(StrEnum):
    """`ab`: D = A * B; `abt`: D = A * B^T."""

    AB = auto()
    ABT = auto()


class Reduction(StrEnum):
    """The combining function of `cuir.row_reduce`."""

    MAX = auto()
    SUM = auto()


class GlobalLayout(StrEnum):
    """`strided`: any strides with a unit innermost one; `row_major`: densely packed."""

    STRIDED = auto()
    ROW_MAJOR = auto()


@irdl_attr_definition
class ScheduleAttr(EnumAttribute[Schedule], SpacedOpaqueSyntaxAttribute):
    name = "cuir.schedule"


@irdl_attr_definition
class TileOrderAttr(EnumAttribute[TileOrder], SpacedOpaqueSyntaxAttribute):
    name = "cuir.tile_order"


@irdl_attr_definition
class GemmLayoutAttr(EnumAttribute[GemmLayout], SpacedOpaqueSyntaxAttribute):
    name = "cuir.gemm_layout"


@irdl_attr_definition
class ReductionAttr(EnumAttribute[Reduction], SpacedOpaqueSyntaxAttribute):
    name = "cuir.reduction"


@irdl_attr_definition
class GlobalLayoutAttr(EnumAttribute[GlobalLayout], SpacedOpaqueSyntaxAttribute):
    name = "cuir.global_layout"


ENUM_ATTRIBUTES = (ScheduleAttr, TileOrderAttr, GemmLayoutAttr, ReductionAttr, GlobalLayoutAttr)


EnumAttr = TypeVar("EnumAttr", bound=EnumAttribute)


def enum_attr(attr_type: type[EnumAttr], value: str, what: str) -> EnumAttr:
    """`value` as an `attr_type`; a word outside the enum is a one-line error naming the choices."""
    choices = [member.value for member in attr_type.enum_type]
    if value not in choices:
        raise VerifyException(f"{what} must be one of {', '.join(choices)}, got '{value}'")
    return attr_type(attr_type.enum_type(value))
