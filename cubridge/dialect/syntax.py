"""Parsing and printing helpers of the CuIR ops whose syntax the declarative format cannot express."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer


def parse_indices(parser: Parser) -> list[SSAValue]:
    """Parse an optional `[%i, %j, ...]` list of index operands."""
    indices = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    return list(indices or [])


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


def print_signature(
    printer: Printer, types: Sequence[Attribute], result: Attribute | None = None
) -> None:
    """Print ` : T1, T2` (` :` without types) and, given a result type, ` -> R`."""
    printer.print_string(" :")
    if types:
        printer.print_string(" ")
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
