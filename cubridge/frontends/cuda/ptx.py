"""The inline PTX of the device primitives, parsed with a lark grammar.

The lifter maps a primitive call to its CuIR op through `cubridge.runtime.primitives`; this module reads
what each primitive's `asm` actually issues, so that the table is checked against the headers (a
primitive whose asm no longer issues the instruction its row names is an error, not a silent mismatch) and
the lifter can read instruction-level facts where they matter (which async group a wait drains).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lark import Lark, Transformer
from lark.exceptions import LarkError
from tree_sitter import Node

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda.source import CudaSource, parse_cuda, parse_cuda_file

# The subset of PTX the primitives use: instructions (optionally guarded by a predicate), `.reg`
# declarations and `{ }` scopes; operands are registers, asm placeholders (%0), special registers (`%%globaltimer`,
# as an asm template spells them), immediates, `_`, vectors `{a, b}` and addresses `[a]` / tensor coordinates
# `[map, {c0, c1}]`.
_GRAMMAR = r"""
    start: item*
    ?item: scope | declaration | instruction
    scope: "{" item* "}"
    declaration: ".reg" TYPE NAME ("," NAME)* ";"
    instruction: guard? OPCODE [operand ("," operand)*] ";"
    guard: "@" NEGATE? NAME
    ?operand: address | vector | PLACEHOLDER | SPECIAL_REGISTER | NUMBER | NAME | SINK
    vector: "{" operand ("," operand)* "}"
    address: "[" operand ("," vector)? "]"
    NEGATE: "!"
    SINK: "_"
    TYPE: /\.[a-z][a-z0-9]*/
    OPCODE.2: /[a-z][a-z0-9_]*(\.[a-z0-9_]+(::[a-z0-9_]+)*)+/ | /(ret|exit|trap)(?![.\w])/
    NAME: /[a-z_][a-z0-9_]*/
    PLACEHOLDER: /%[0-9]+/
    SPECIAL_REGISTER: /%%[a-z][a-z0-9_]*/
    NUMBER: /-?(0[xX][0-9a-fA-F]+|[0-9]+)/
    %import common.WS
    %ignore WS
"""


@cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr")


@dataclass(frozen=True)
class PtxInstruction:
    """One PTX instruction: `opcode` with its modifiers (e.g. `wgmma.wait_group.sync.aligned`), operands as text."""

    opcode: str
    operands: tuple[str, ...]
    guard: str | None = None

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]


class _Instructions(Transformer):
    def start(self, items):
        return [instruction for item in items for instruction in (item if isinstance(item, list) else [item])
                if isinstance(instruction, PtxInstruction)]

    def scope(self, items):
        return self.start(items)

    def declaration(self, _items):
        return None

    def instruction(self, items):
        guard = items[0] if items and isinstance(items[0], tuple) else None
        rest = items[1:] if guard is not None else items
        opcode, operands = str(rest[0]), tuple(str(operand) for operand in rest[1:] if operand is not None)
        return PtxInstruction(opcode, operands, "".join(guard) if guard else None)

    def guard(self, items):
        return tuple(str(item) for item in items)

    def vector(self, items):
        return "{" + ", ".join(str(item) for item in items) + "}"

    def address(self, items):
        return "[" + ", ".join(str(item) for item in items) + "]"


def parse_ptx(text: str) -> list[PtxInstruction]:
    """The instructions of one inline-asm template; a malformed template raises ValueError."""
    try:
        return _Instructions().transform(_parser().parse(text))
    except LarkError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None


def _string_value(source: CudaSource, node: Node, arguments: dict[str, str]) -> str:
    """The text of an asm template: concatenated literals, macro parameters replaced by `arguments`."""
    if node.type == "string_literal":
        raw = node.text.decode()[1:-1]
        return codecs.decode(raw, "unicode_escape")
    if node.type == "concatenated_string":
        return "".join(_string_value(source, part, arguments) for part in node.named_children)
    if node.type == "identifier" and node.text.decode() in arguments:
        return arguments[node.text.decode()]
    raise source.error(node, f"inline asm template part `{source.code(node)}` is not a string")


def _walk(node: Node):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _asm_of(source: CudaSource, body: Node, arguments: dict[str, str]) -> list[PtxInstruction]:
    instructions: list[PtxInstruction] = []
    for node in _walk(body):
        if node.type != "gnu_asm_expression":
            continue
        template = _string_value(source, node.child_by_field_name("assembly_code"), arguments)
        try:
            instructions += parse_ptx(template)
        except ValueError as exc:
            raise source.error(node, f"inline PTX not understood: {exc}") from None
    return instructions


def _defined_name(definition: Node) -> str | None:
    """The name a function definition or struct specifier defines (`Wgmma` for `struct Wgmma<64, T>`)."""
    if definition.type == "function_definition":
        declarator = definition.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        name = declarator.child_by_field_name("declarator") if declarator is not None else None
        if name is not None and name.type == "template_function":  # a specialization: mma_16816<__half>
            name = name.child_by_field_name("name")
        return name.text.decode().split("::")[-1] if name is not None else None
    name = definition.child_by_field_name("name")
    if name is None:
        return None
    if name.type == "template_type":
        name = name.child_by_field_name("name")
    return name.text.decode()


def _definitions(source: CudaSource, root: Node, arguments: dict[str, str], found: dict[str, list[PtxInstruction]]):
    for node in _walk(root):
        if node.type not in ("function_definition", "struct_specifier") or node.child_by_field_name("body") is None:
            continue
        if _in_struct(node):  # a member: its asm counts for the struct
            continue
        name = _defined_name(node)
        instructions = _asm_of(source, node.child_by_field_name("body"), arguments)
        if name is not None and instructions:
            found.setdefault(name, []).extend(instructions)


def _macro_expansions(source: CudaSource, found: dict[str, list[PtxInstruction]]):
    """Asm in function-like macros, once per invocation with the invocation's string arguments."""
    macros = {}
    for node in _walk(source.root):
        if node.type == "preproc_function_def":
            parameters = [p.text.decode() for p in node.child_by_field_name("parameters").named_children]
            value = node.child_by_field_name("value")
            macros[node.child_by_field_name("name").text.decode()] = (parameters, value)
    for node in _walk(source.root):
        if node.type != "call_expression" or node.child_by_field_name("function").text.decode() not in macros:
            continue
        parameters, value = macros[node.child_by_field_name("function").text.decode()]
        arguments = [a.text.decode() for a in node.child_by_field_name("arguments").named_children]
        string_arguments = {p: a[1:-1] for p, a in zip(parameters, arguments) if a.startswith('"')}
        body_text = value.text.replace(b"\\\n", b"  \n")
        body = parse_cuda(body_text, f"{source.path}:{value.start_point[0] + 1} (macro body)")
        _definitions(body, body.root, string_arguments, found)


@cache
def header_instructions(header: Path) -> dict[str, tuple[PtxInstruction, ...]]:
    """Every function and struct of `header` that issues inline PTX, with the instructions it issues."""
    source = parse_cuda_file(header)
    found: dict[str, list[PtxInstruction]] = {}
    _definitions(source, source.root, {}, found)
    _macro_expansions(source, found)
    return {name: tuple(instructions) for name, instructions in found.items()}


def primitive_instructions(function: str, header: Path) -> tuple[PtxInstruction, ...]:
    """The PTX that primitive `function` issues: its own asm and that of the helpers and asm structs of
    `header` its body reaches (`load_a_fragment` -> `ldmatrix_x4`, `gemm_async` -> `Wgmma`)."""
    table = header_instructions(header)
    bodies = _bodies(header)
    if function not in bodies:
        raise CuBridgeError(f"no primitive `{function}` in {header.name}")
    reached, pending = set(), [function]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        pending += [n for body in bodies.get(name, ()) for n in _names_used(body) if n in bodies or n in table]
    return tuple(instruction for name in sorted(reached) for instruction in table.get(name, ()))


@cache
def _bodies(header: Path) -> dict[str, list[Node]]:
    source = parse_cuda_file(header)
    bodies: dict[str, list[Node]] = {}
    for node in _walk(source.root):
        if node.type == "function_definition" and not _in_struct(node):
            bodies.setdefault(_defined_name(node), []).append(node.child_by_field_name("body"))
    return bodies


def _in_struct(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == "struct_specifier":
            return True
        parent = parent.parent
    return False


def _names_used(body: Node) -> set[str]:
    return {n.text.decode() for n in _walk(body) if n.type in ("identifier", "type_identifier")}
