"""CUDA C++ source parsed with tree-sitter-cuda, with located one-line errors.

Pragmas are taken out before parsing: tree-sitter-cuda 0.21.2 parses a `#pragma unroll` between a brace-less
`for` header and its body as a sibling statement and gives the `for` an empty body (a MISSING `;` node), so
the loop would silently lose its body. Each pragma line is blanked to spaces of the same length (every byte
offset, line and column is kept) and recorded by line; `pragma_before(node)` gives a statement its pragma back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

from cubridge.diagnostics import CuBridgeError, SourceLocation

_PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma\b[^\n]*", re.MULTILINE)
# CUDA attribute macros the grammar does not know in declarations (`extern __shared__ __align__(16) char x[];`,
# an entry point's `__cluster_dims__(2, 1, 1)`): blanked like pragmas; a cluster's sizes are kept by line.
_ATTRIBUTE_MACRO = re.compile(rb"\b(?:__align__|__cluster_dims__)\s*\([^()]*\)")
_CLUSTER_DIMS = re.compile(rb"__cluster_dims__\s*\(([^()]*)\)")


@cache
def _parser() -> Parser:
    return Parser(Language(tree_sitter_cuda.language()))


def _blank(text: bytes, match: re.Match[bytes]) -> bytes:
    return text[: match.start()] + b" " * (match.end() - match.start()) + text[match.end() :]


@dataclass(frozen=True)
class CudaSource:
    """One parsed CUDA file: its bytes (pragmas blanked), tree, pragmas and `__cluster_dims__` sizes (as written)
    by 0-based line."""

    path: str
    text: bytes
    tree: Tree
    pragmas: dict[int, str] = field(default_factory=dict)
    cluster_dims: dict[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def location(self, node: Node) -> SourceLocation:
        """file:line:col (1-based) of `node`'s first byte."""
        row, column = node.start_point
        return SourceLocation(self.path, row + 1, column + 1)

    def error(self, node: Node, message: str) -> CuBridgeError:
        """A one-line error located at `node`."""
        return CuBridgeError(message, str(self.location(node)))

    def code(self, node: Node) -> str:
        """`node`'s source text on one line (whitespace runs collapsed), for messages."""
        return " ".join(node.text.decode().split())

    def pragma_before(self, node: Node) -> str | None:
        """The `#pragma` text on the lines right above `node` (blank lines and comments skipped), if any."""
        row = node.start_point[0] - 1
        lines = self.text.split(b"\n")
        while row >= 0:
            if row in self.pragmas:
                return self.pragmas[row]
            stripped = lines[row].strip()
            if stripped and not stripped.startswith(b"//"):
                return None
            row -= 1
        return None


def parse_cuda(text: bytes, path: str) -> CudaSource:
    """Parse CUDA C++ `text` (named `path` in messages); a syntax error raises a located CuBridgeError."""
    pragmas: dict[int, str] = {}
    for match in reversed(list(_PRAGMA.finditer(text))):
        pragmas[text.count(b"\n", 0, match.start())] = match.group().decode().strip()
        text = _blank(text, match)
    cluster_dims = {text.count(b"\n", 0, match.start()): tuple(size.strip() for size in match.group(1).decode().split(","))
                    for match in _CLUSTER_DIMS.finditer(text)}
    for match in reversed(list(_ATTRIBUTE_MACRO.finditer(text))):
        text = _blank(text, match)
    tree = _parser().parse(text)
    source = CudaSource(path, text, tree, pragmas, cluster_dims)
    problem = _first_syntax_error(tree.root_node)
    if problem is not None:
        raise problem_error(source, problem)
    return source


def parse_cuda_file(path: str | Path) -> CudaSource:
    """Parse the CUDA file at `path` (a missing file is a one-line error)."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise CuBridgeError(f"cannot read CUDA source: {exc.strerror}", str(path)) from None
    return parse_cuda(text, str(path))


def problem_error(source: CudaSource, node: Node) -> CuBridgeError:
    if node.is_missing:
        return source.error(node, f"syntax error: expected `{node.type}`")
    shown = source.code(node)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return source.error(node, f"syntax error at `{shown}`")


def _first_syntax_error(root: Node) -> Node | None:
    """The first ERROR or MISSING node, except the `;` a file-scope macro invocation lacks."""
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or (node.is_missing and not _is_macro_invocation_end(node)):
            return node
        if node.has_error:
            stack.extend(reversed(node.children))
    return None


def _is_macro_invocation_end(missing: Node) -> bool:
    """A MISSING `;` closing `NAME(args)` at file or namespace scope: a macro invocation such as an entry point."""
    statement = missing.parent
    if missing.type != ";" or statement is None or statement.type != "expression_statement":
        return False
    scope = statement.parent
    call = statement.named_children[0] if statement.named_children else None
    return (
        scope is not None
        and scope.type in ("translation_unit", "declaration_list")
        and call is not None
        and call.type == "call_expression"
        and call.child_by_field_name("function").type == "identifier"
    )
