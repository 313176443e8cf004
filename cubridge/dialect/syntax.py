"""Parsing and printing helpers shared by the CuIR custom assembly formats."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Attribute, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer


def parse_indices(parser: Parser) -> list[SSAValue]:
    """Parse an optional `[%i, %j, ...]` list of index operands."""
    indices = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    return list(indices or [])


def parse_ref(parser: Parser) -> tuple[UnresolvedOperand, list[SSAValue]]:
    """Parse `%buffer` or `%buffer[%i, ...]`; the buffer is resolved later, once its type is known."""
    base = parser.parse_unresolved_operand()
    return base, parse_indices(parser)


def print_ref(printer: Printer, base: SSAValue, indices: Sequence[SSAValue]) -> None:
    printer.print_string(" ")
    printer.print_operand(base)
    if indices:
        printer.print_string("[")
        printer.print_list(indices, printer.print_operand)
        printer.print_string("]")


def print_types(printer: Printer, types: Sequence[Attribute]) -> None:
    printer.print_list(types, printer.print_attribute)


def parse_types(parser: Parser) -> list[Attribute]:
    types = [parser.parse_type()]
    while parser.parse_optional_punctuation(","):
        types.append(parser.parse_type())
    return types
