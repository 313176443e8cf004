"""Located diagnostics: parsing that records where each op came from, and
verification that reports the first failing op as `file:line:col: error: ...`.

Parsed ops get a `FileLineColLoc` unless the text gives one with `loc(...)`;
lifted ops carry the CUDA location they came from the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import UNKNOWN_LOC, CallSiteLoc, FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException


class CuBridgeError(Exception):
    """A user-facing error: printed as one located line, never as a traceback."""

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is None:
            return f"error: {self.message}"
        return f"{self.location}: error: {self.message}"


CUDA_SUFFIXES = (".cu", ".cuh")


def refuse_cuda_input(path: str | None, lift_hint: str) -> None:
    """A CuBridgeError where `path` names CUDA source given to a tool that reads CuIR (which would otherwise fail
    on the first line that is not MLIR syntax); `lift_hint` says how to lift it."""
    if path is not None and path.endswith(CUDA_SUFFIXES):
        raise CuBridgeError(f"input is CUDA source, not CuIR: {lift_hint}", path)


@dataclass(frozen=True)
class SourceLocation:
    filename: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"


def location_of(op: Operation) -> SourceLocation | None:
    """The source location recorded on `op`, if any (of a lifted op from an inlined helper: the helper's line,
    the innermost of its call-site location)."""
    loc = op.location
    while isinstance(loc, CallSiteLoc):
        loc = loc.callee
    if not isinstance(loc, FileLineColLoc):
        return None
    return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)


def describe_location(op: Operation) -> str:
    """`file:line:col` of `op`, or its name where no location was recorded."""
    where = location_of(op)
    return str(where) if where is not None else f"<{op.name}>"


class LocatingParser(Parser):
    """A parser that stamps every op it parses with its file:line:col.

    `line_offset` shifts reported lines, for chunks of a `--split-input-file` input.
    """

    def __init__(self, ctx: Context, text: str, filename: str, line_offset: int = 0):
        super().__init__(ctx, text, filename)
        self.line_offset = line_offset
        self.first_uses: dict[str, Span] = {}

    def at_end(self) -> bool:
        return self._current_token.kind == MLIRTokenKind.EOF

    def current_location(self) -> SourceLocation:
        where = self._current_token.span.get_location()
        return SourceLocation(where.file, where.line + self.line_offset, where.col)

    def parse_optional_type(self):
        # type parameters are verified as the type is built: report the failure
        # at the type, not at whatever token follows it
        start = self._current_token.span.start
        try:
            return super().parse_optional_type()
        except VerifyException as error:
            self.raise_error(str(error.args[0]), start)

    def parse_optional_attribute(self):
        start = self._current_token.span.start
        try:
            return super().parse_optional_attribute()
        except VerifyException as error:
            self.raise_error(str(error.args[0]), start)

    def resolve_operand(self, operand, type):
        # remember where each not-yet-defined value is first used
        if operand.operand_name not in self.ssa_values:
            self.first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as error:
            undefined = list(self.forward_ssa_references)
            if not undefined or not error.msg.startswith("values used but not defined"):
                raise
            # report the first use of an undefined value, not the end of the input
            first = min(undefined, key=lambda name: self.first_uses[name].start)
            raise ParseError(self.first_uses[first], error.msg) from None

    def _get_op_by_name(self, name: str) -> type[Operation]:
        # report an unknown op at the op, not at the token after its name
        try:
            return super()._get_op_by_name(name)
        except ParseError as error:
            self.raise_error(error.msg, self._op_start)

    def parse_optional_operation(self) -> Operation | None:
        start = self.current_location()
        self._op_start = self.pos
        op = super().parse_optional_operation()
        if op is not None and op.location == UNKNOWN_LOC:
            op.location = FileLineColLoc(
                StringAttr(start.filename), IntAttr(start.line), IntAttr(start.column)
            )
        return op


def parse_module(ctx: Context, text: str, filename: str, line_offset: int = 0) -> ModuleOp:
    """Parse `text` into a located module; raises CuBridgeError on bad input."""
    parser = None
    try:
        # the parser lexes its first token as it is built: that can fail too
        parser = LocatingParser(ctx, text, filename, line_offset)
        if parser.at_end():
            # like mlir-opt: input with no ops (empty, or only comments, as after a
            # trailing `// -----`) is an empty module, not a parse error
            return ModuleOp([])
        return parser.parse_module()
    except ParseError as error:
        where = error.span.get_location()
        raise CuBridgeError(
            error.msg, f"{where.file}:{where.line + line_offset}:{where.col}"
        ) from None
    except VerifyException as error:
        # attribute and type parameters are verified as they are parsed
        where = str(parser.current_location()) if parser is not None else filename
        raise CuBridgeError(str(error.args[0]), where) from None


def verify_module(module: ModuleOp) -> None:
    """Verify every op, nested ops before the op that holds them (the innermost
    failure is the most precise); the first failure becomes a located CuBridgeError."""
    for op in _post_order(module):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as error:
            raise CuBridgeError(str(error.args[0]), describe_location(op)) from None


def _post_order(op: Operation):
    for region in op.regions:
        for block in region.blocks:
            for nested in block.ops:
                yield from _post_order(nested)
    yield op
