"""Parsing and printing helpers shared by the CuIR custom assembly formats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.lexer import Position

ONE_TYPE_PER_OPERAND = "expected one type per operand"


def parse_indices(parser: Parser) -> list[SSAValue]:
    """Parse an optional `[%i, %j, ...]` list of index operands."""
    indices = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    return list(indices or [])


@dataclass
class Ref:
    """A parsed `%buffer` or `%buffer[%i, ...]`; the buffer is resolved once its type is known."""

    at: Position
    base: UnresolvedOperand
    indices: list[SSAValue]

    def stage(self, parser: Parser, message: str) -> SSAValue | None:
        """The stage index, if any; more than one is an error located at the reference."""
        if len(self.indices) > 1:
            parser.raise_error(message, self.at)
        return self.indices[0] if self.indices else None

    def resolve(self, parser: Parser, type: Attribute) -> SSAValue:
        """The buffer, now that its type is known."""
        return parser.resolve_operand(self.base, type)


def parse_ref(parser: Parser) -> Ref:
    """Parse `%buffer` or `%buffer[%i, ...]`."""
    at = parser.pos
    base = parser.parse_unresolved_operand()
    return Ref(at, base, parse_indices(parser))


def parse_keyword_operand(parser: Parser, keyword: str) -> UnresolvedOperand | None:
    """Parse an optional `keyword %value`."""
    if not parser.parse_optional_keyword(keyword):
        return None
    return parser.parse_unresolved_operand()


def print_ref(printer: Printer, base: SSAValue, indices: Sequence[SSAValue]) -> None:
    """Print ` %buffer` or ` %buffer[%i, ...]`."""
    printer.print_string(" ")
    printer.print_operand(base)
    if indices:
        printer.print_string("[")
        printer.print_list(indices, printer.print_operand)
        printer.print_string("]")


def parse_types(parser: Parser) -> list[Attribute]:
    """Parse `T1, T2, ...` (at least one type)."""
    types = [parser.parse_type()]
    while parser.parse_optional_punctuation(","):
        types.append(parser.parse_type())
    return types


def parse_colon_type(parser: Parser) -> Attribute:
    """Parse `: T`."""
    parser.parse_punctuation(":")
    return parser.parse_type()


def parse_arrow_type(parser: Parser) -> Attribute:
    """Parse `-> T`."""
    parser.parse_punctuation("->")
    return parser.parse_type()


def parse_colon_types(
    parser: Parser, count: int, message: str = ONE_TYPE_PER_OPERAND
) -> list[Attribute]:
    """Parse `: T1, T2, ...`, which must give `count` types; a wrong count is reported at the types."""
    parser.parse_punctuation(":")
    types_at = parser.pos
    types = parse_types(parser)
    if len(types) != count:
        parser.raise_error(message, types_at)
    return types


def print_signature(
    printer: Printer, types: Sequence[Attribute], result: Attribute | None = None
) -> None:
    """Print ` : T1, T2` and, given a result type, ` -> R`."""
    printer.print_string(" : ")
    printer.print_list(types, printer.print_attribute)
    if result is None:
        return
    printer.print_string(" -> ")
    printer.print_attribute(result)


def parse_typed_arguments(parser: Parser) -> list[Parser.Argument]:
    """Parse `(%a: T, ...)` block arguments."""
    return parser.parse_comma_separated_list(
        Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=True)
    )


def print_typed_arguments(printer: Printer, args: Sequence[SSAValue]) -> None:
    """Print `(%a: T, ...)`."""
    printer.print_string("(")
    printer.print_list(args, printer.print_block_argument)
    printer.print_string(")")


def parse_keyword_attributes(parser: Parser) -> dict[str, Attribute]:
    """Parse an optional `attributes {...}`."""
    attributes = parser.parse_optional_attr_dict_with_keyword()
    return {} if attributes is None else attributes.data


def print_body(printer: Printer, body: Region, **options: bool) -> None:
    """Print ` {...}`, a body whose entry block arguments the op prints itself."""
    printer.print_string(" ")
    printer.print_region(body, print_entry_block_args=False, print_empty_block=False, **options)
