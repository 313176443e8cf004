"""CuIR types: where a value lives (global, shared, registers) and who owns it.

Register-resident values (tiles, row/column vectors, async tokens) carry the
worker that owns them, written `@name`: a warp-group role declared by
`cuir.worker`. Values shared by the whole thread block (shared-memory buffers,
mbarriers) carry a stage count: the number of copies a pipeline rotates over.

The types parse and print their parameters by hand: xDSL 0.74's declarative
format for attributes has keywords and whitespace but no parameter variables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntAttr,
    IntegerType,
    StringAttr,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from cubridge.dialect.attributes import GlobalLayout, GlobalLayoutAttr, enum_attr

REGISTER_ELEMENT_TYPES = (Float32Type, BFloat16Type, Float16Type)
SHARED_SWIZZLES = (0, 32, 64, 128)


def element_bytes(element_type: Attribute) -> int:
    """Size in bytes of one element of a CuIR memory or register type."""
    if isinstance(element_type, Float32Type):
        return 4
    if isinstance(element_type, BFloat16Type | Float16Type):
        return 2
    if isinstance(element_type, IntegerType):
        return max(1, element_type.width.data // 8)
    raise VerifyException(f"unsupported element type {element_type}")


def _check_register_element(element_type: Attribute, what: str) -> None:
    if not isinstance(element_type, REGISTER_ELEMENT_TYPES):
        raise VerifyException(
            f"{what} elements must be f32, bf16 or f16, got {element_type}"
        )


def _parse_owner(parser: AttrParser) -> StringAttr:
    return parser.parse_symbol_name()


def _print_owner(printer: Printer, owner: StringAttr) -> None:
    printer.print_string(", @")
    printer.print_string(owner.data)


@irdl_attr_definition
class GlobalTensorType(ParametrizedAttribute, TypeAttribute):
    """A tensor in global memory whose sizes and strides are runtime values.

    `strided`: any strides with a unit innermost stride (q, k, v, o);
    `row_major`: densely packed (captured lookup tables).
    Syntax: `!cuir.global<4 x bf16, strided>`.
    """

    name = "cuir.global"

    rank: IntAttr
    element_type: Attribute
    layout: GlobalLayoutAttr

    def __init__(self, rank: int, element_type: Attribute, layout: str = "strided"):
        super().__init__(
            IntAttr(rank), element_type, enum_attr(GlobalLayoutAttr, layout, "global layout")
        )

    def verify(self) -> None:
        if self.rank.data < 1:
            raise VerifyException("a global tensor has rank >= 1")
        element_bytes(self.element_type)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            rank = parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_shape_delimiter()
            element_type = parser.parse_type()
            parser.parse_punctuation(",")
            layout = parser.parse_str_enum(GlobalLayout)
        return (IntAttr(rank), element_type, GlobalLayoutAttr(layout))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.rank.data} x ")
            printer.print_attribute(self.element_type)
            printer.print_string(f", {self.layout.data.value}")


@irdl_attr_definition
class SharedBufferType(ParametrizedAttribute, TypeAttribute):
    """A shared-memory tile buffer, `stages` copies deep, optionally swizzled.

    Syntax: `!cuir.smem<128x128xbf16, stages 2, swizzle 128>`; stages 1 and
    swizzle 0 are the defaults and are not printed.
    """

    name = "cuir.smem"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    stages: IntAttr
    swizzle: IntAttr

    def __init__(
        self,
        shape: Sequence[int],
        element_type: Attribute,
        stages: int = 1,
        swizzle: int = 0,
    ):
        super().__init__(
            ArrayAttr([IntAttr(d) for d in shape]),
            element_type,
            IntAttr(stages),
            IntAttr(swizzle),
        )

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def stage_bytes(self) -> int:
        count = 1
        for d in self.dims:
            count *= d
        return count * element_bytes(self.element_type)

    @property
    def total_bytes(self) -> int:
        return self.stage_bytes * self.stages.data

    def verify(self) -> None:
        if len(self.dims) != 2 or min(self.dims) < 1:
            raise VerifyException(
                f"a shared buffer is a 2-d tile with positive sizes, got {list(self.dims)}"
            )
        if self.stages.data < 1:
            raise VerifyException("a shared buffer has at least one stage")
        if self.swizzle.data not in SHARED_SWIZZLES:
            raise VerifyException(
                f"swizzle must be one of {SHARED_SWIZZLES} bytes, got {self.swizzle.data}"
            )
        element_bytes(self.element_type)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims, element_type = parser.parse_ranked_shape()
            stages, swizzle = 1, 0
            while parser.parse_optional_punctuation(","):
                key = parser.parse_keyword_in(("stages", "swizzle"))
                value = parser.parse_integer(allow_boolean=False, allow_negative=False)
                if key == "stages":
                    stages = value
                else:
                    swizzle = value
        return (
            ArrayAttr([IntAttr(d) for d in dims]),
            element_type,
            IntAttr(stages),
            IntAttr(swizzle),
        )

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("x".join(str(d) for d in self.dims) + "x")
            printer.print_attribute(self.element_type)
            if self.stages.data != 1:
                printer.print_string(f", stages {self.stages.data}")
            if self.swizzle.data != 0:
                printer.print_string(f", swizzle {self.swizzle.data}")


@irdl_attr_definition
class TileType(ParametrizedAttribute, TypeAttribute):
    """A 2-d register tile distributed over the threads of its owning worker.

    Syntax: `!cuir.tile<64x128xf32, @consumer>`.
    """

    name = "cuir.tile"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    owner: StringAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, owner: str):
        super().__init__(
            ArrayAttr([IntAttr(d) for d in shape]), element_type, StringAttr(owner)
        )

    @property
    def dims(self) -> tuple[int, int]:
        rows, cols = (d.data for d in self.shape.data)
        return rows, cols

    def verify(self) -> None:
        dims = [d.data for d in self.shape.data]
        if len(dims) != 2 or min(dims) < 1:
            raise VerifyException(
                f"a register tile is 2-d with positive sizes, got {dims}"
            )
        _check_register_element(self.element_type, "register tile")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            owner = _parse_owner(parser)
        return (ArrayAttr([IntAttr(d) for d in dims]), element_type, owner)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            rows, cols = self.dims
            printer.print_string(f"{rows}x{cols}x")
            printer.print_attribute(self.element_type)
            _print_owner(printer, self.owner)


@dataclass(frozen=True, init=False)  # so that subclasses compare and hash their parameters
class _VectorOfTile(ParametrizedAttribute, TypeAttribute):
    """One value per row (or per column) of a register tile."""

    length: IntAttr
    element_type: Attribute
    owner: StringAttr

    def __init__(self, length: int, element_type: Attribute, owner: str):
        super().__init__(IntAttr(length), element_type, StringAttr(owner))

    def verify(self) -> None:
        if self.length.data < 1:
            raise VerifyException(f"{self.name} needs a positive length")
        _check_register_element(self.element_type, self.name)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            shape_at = parser.pos
            dims, element_type = parser.parse_ranked_shape()
            if len(dims) != 1:
                parser.raise_error("expected one dimension, e.g. 64xf32", shape_at)
            parser.parse_punctuation(",")
            owner = _parse_owner(parser)
        return (IntAttr(dims[0]), element_type, owner)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.length.data}x")
            printer.print_attribute(self.element_type)
            _print_owner(printer, self.owner)


@irdl_attr_definition
class RowVectorType(_VectorOfTile):
    """One value per tile row (row max, row sum). Syntax: `!cuir.rows<64xf32, @consumer>`."""

    name = "cuir.rows"


@irdl_attr_definition
class ColVectorType(_VectorOfTile):
    """One value per tile column. Syntax: `!cuir.cols<128xf32, @consumer>`."""

    name = "cuir.cols"


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """An async group (cp.async/TMA-store group or wgmma group) of one worker.

    Only the owning worker may wait on it. Syntax: `!cuir.token<@consumer>`.
    """

    name = "cuir.token"

    owner: StringAttr

    def __init__(self, owner: str):
        super().__init__(StringAttr(owner))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            owner = _parse_owner(parser)
        return (owner,)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("@" + self.owner.data)


@irdl_attr_definition
class MbarrierType(ParametrizedAttribute, TypeAttribute):
    """`stages` shared-memory mbarriers, one per pipeline stage.

    Syntax: `!cuir.mbarrier<2>`.
    """

    name = "cuir.mbarrier"

    stages: IntAttr

    def __init__(self, stages: int = 1):
        super().__init__(IntAttr(stages))

    def verify(self) -> None:
        if self.stages.data < 1:
            raise VerifyException("an mbarrier array has at least one stage")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            stages = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return (IntAttr(stages),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(str(self.stages.data))


MBARRIER_BYTES = 8
OWNED_TYPES = (TileType, RowVectorType, ColVectorType, TokenType)
REGISTER_VALUE_TYPES = (TileType, RowVectorType, ColVectorType)
