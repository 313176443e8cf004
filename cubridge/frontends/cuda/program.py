"""The definitions of a CUDA translation unit the lifter reads: functions, structs, constants, entry points.

Project headers named by `#include "..."` (searched beside the file and in the include directories) are
indexed too; system and CUDA headers are not: a name defined only there is a located error where used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tree_sitter import Node

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda.source import CudaSource, parse_cuda, parse_cuda_file


def walk(node: Node):
    """`node` and its descendants, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def text(node: Node) -> str:
    return node.text.decode()


@dataclass(frozen=True)
class Definition:
    """A function, struct or constant: its node, the source it is in and its template parameters."""

    node: Node
    source: CudaSource
    template_parameters: tuple[tuple[str, str], ...] = ()  # (kind: "type" | "value", name)


@dataclass
class StructDefinition:
    definition: Definition
    bases: tuple[str, ...]
    members: dict[str, Definition] = field(default_factory=dict)  # static constexpr members and nested types
    fields: list[tuple[str, str, Node | None]] = field(default_factory=list)  # (type, name, default)
    methods: dict[str, list[Definition]] = field(default_factory=dict)
    field_shapes: dict[str, list[Node]] = field(default_factory=dict)  # array fields: their size expressions


@dataclass(frozen=True)
class EntryPoint:
    """One `__global__` instance: its name, where it is instantiated and its function definition."""

    name: str
    call: Node  # the macro invocation, the launch of a template instance (or the definition itself)
    source: CudaSource
    function: Definition
    template_arguments: tuple[Node, ...] = ()  # of a template kernel's instance: `fwd_attend_ker<128, false>`


def _defines_struct(member: Node) -> bool:
    """Whether a field declaration only defines a named nested struct (no field of it)."""
    type_node = member.child_by_field_name("type")
    return (type_node.type == "struct_specifier" and type_node.child_by_field_name("body") is not None
            and type_node.child_by_field_name("name") is not None and not member.children_by_field_name("declarator"))


def _template_parameters(node: Node) -> tuple[tuple[str, str], ...]:
    parameters = []
    for parameter in node.child_by_field_name("parameters").named_children:
        declarator = parameter.child_by_field_name("declarator") or parameter.child_by_field_name("name")
        name = text(declarator) if declarator is not None else text(parameter).split()[-1]
        kind = "type" if parameter.type.startswith("type_parameter") else "value"
        parameters.append((kind, name.lstrip("&*")))
    return tuple(parameters)


def declarator_name(node: Node) -> str | None:
    """The declared name under a (possibly nested) declarator: `k_tile` in `T* k_tile(int) const`."""
    while node is not None:
        if node.type in ("identifier", "field_identifier", "type_identifier", "destructor_name"):
            return text(node)
        if node.type in ("qualified_identifier", "template_function"):
            return text(node.child_by_field_name("name"))
        if node.type == "operator_name":
            return text(node)
        inner = node.child_by_field_name("declarator")
        if inner is None and node.type in ("reference_declarator", "abstract_reference_declarator",
                                           "parenthesized_declarator"):
            inner = node.named_children[-1] if node.named_children else None
        node = inner
    return None


class Program:
    """Every definition of a CUDA file and of the project headers it includes."""

    def __init__(self, main: CudaSource, include_dirs: tuple[Path, ...]):
        self.main = main
        self.include_dirs = include_dirs
        self.functions: dict[str, list[Definition]] = {}
        self.structs: dict[str, StructDefinition] = {}
        # explicit specializations (`template<> struct Dims<64> {...}`): name -> [(argument nodes, struct)]
        self.specializations: dict[str, list[tuple[tuple[Node, ...], StructDefinition]]] = {}
        self.constants: dict[str, Definition] = {}
        self.macros: dict[str, tuple[list[str], Node, CudaSource]] = {}
        self.sources: list[CudaSource] = []
        self._index(main, seen=set())

    # ---------------------------------------------------------------------------------------------------
    def _index(self, source: CudaSource, seen: set[str]) -> None:
        self.sources.append(source)
        for node in walk(source.root):
            if node.type == "preproc_include":
                self._include(source, node, seen)
        self._index_scope(source, source.root, ())

    def _include(self, source: CudaSource, node: Node, seen: set[str]) -> None:
        path_node = node.child_by_field_name("path")
        if path_node.type != "string_literal":
            return  # <system header>: not indexed
        name = text(path_node)[1:-1]
        for directory in (Path(source.path).parent, *self.include_dirs):
            candidate = directory / name
            if candidate.is_file():
                key = str(candidate.resolve())
                if key not in seen:
                    seen.add(key)
                    self._index(parse_cuda_file(candidate), seen)
                return

    def _index_scope(self, source: CudaSource, scope: Node, template: tuple) -> None:
        for node in scope.named_children:
            if node.type in ("namespace_definition", "linkage_specification"):
                self._index_scope(source, node.child_by_field_name("body"), ())
            elif node.type == "declaration_list":
                self._index_scope(source, node, ())
            elif node.type == "template_declaration":
                parameters = _template_parameters(node)
                inner = [c for c in node.named_children if c.type != "template_parameter_list"]
                for child in inner:
                    self._index_definition(source, child, parameters)
            elif node.type == "preproc_function_def":
                parameters = [text(p) for p in node.child_by_field_name("parameters").named_children]
                self.macros[text(node.child_by_field_name("name"))] = (parameters, node, source)
            else:
                self._index_definition(source, node, template)

    def _index_definition(self, source: CudaSource, node: Node, template: tuple) -> None:
        if node.type == "function_definition":
            name = declarator_name(node.child_by_field_name("declarator"))
            self.functions.setdefault(name, []).append(Definition(node, source, template))
        elif node.type == "struct_specifier" and node.child_by_field_name("body") is not None:
            self._index_struct(source, node, template)
        elif node.type == "declaration" and node.child_by_field_name("type") is not None:
            specifier = node.child_by_field_name("type")
            if specifier.type == "struct_specifier" and specifier.child_by_field_name("body") is not None:
                self._index_struct(source, specifier, template)
            if any(text(c) == "constexpr" for c in node.children if c.type == "type_qualifier"):
                for declarator in node.children_by_field_name("declarator"):
                    self.constants[declarator_name(declarator)] = Definition(declarator, source, template)

    def _index_struct(self, source: CudaSource, node: Node, template: tuple, enclosing: str = "") -> None:
        """Index a struct by its name (`Outer::Inner` for one defined inside `enclosing`'s body)."""
        name_node = node.child_by_field_name("name")
        specialized = None
        if name_node.type == "template_type":  # an explicit specialization: found by its arguments
            specialized = tuple(name_node.child_by_field_name("arguments").named_children)
            name_node = name_node.child_by_field_name("name")
        bases = ()
        for child in node.named_children:
            if child.type == "base_class_clause":
                bases = tuple(text(c) for c in child.named_children if c.type in ("type_identifier", "template_type"))
        struct = StructDefinition(Definition(node, source, template), bases)
        for member in node.child_by_field_name("body").named_children:
            member_template: tuple = ()
            if member.type == "template_declaration":
                member_template = _template_parameters(member)
                member = next(c for c in member.named_children if c.type != "template_parameter_list")
            if member.type == "function_definition":
                method = declarator_name(member.child_by_field_name("declarator"))
                struct.methods.setdefault(method, []).append(Definition(member, source, member_template))
            elif member.type == "field_declaration" and _defines_struct(member):  # struct Args { ... };
                self._index_struct(source, member.child_by_field_name("type"), template, f"{text(name_node)}::")
            elif member.type == "field_declaration":
                type_node = member.child_by_field_name("type")
                is_static = any(text(c) == "static" for c in member.children if c.type == "storage_class_specifier")
                for declarator in member.children_by_field_name("declarator"):
                    member_name = declarator_name(declarator)
                    default = member.child_by_field_name("default_value")
                    if is_static:
                        struct.members[member_name] = Definition(member, source, member_template)
                    else:
                        struct.fields.append((text(type_node), member_name, default))
                        sizes = []
                        while declarator.type == "array_declarator":
                            sizes.insert(0, declarator.child_by_field_name("size"))
                            declarator = declarator.child_by_field_name("declarator")
                        if sizes:
                            struct.field_shapes[member_name] = sizes
            elif member.type in ("alias_declaration", "type_definition"):
                struct.members[text(member.child_by_field_name("name"))] = Definition(member, source, ())
            elif member.type == "struct_specifier":
                struct.members[text(member.child_by_field_name("name"))] = Definition(member, source, ())
        if specialized is not None:
            self.specializations.setdefault(text(name_node), []).append((specialized, struct))
            return
        self.structs[enclosing + text(name_node)] = struct

    # ---------------------------------------------------------------------------------------------------
    def entry_points(self) -> list[EntryPoint]:
        """The `__global__` functions of the main file, in order: plain definitions and the instances that
        function-like macros defining a `__global__` function produce (one per invocation)."""
        entries: list[EntryPoint] = []
        for node in self.main.root.named_children:
            entries += self._entries_at(node)
        return entries

    def _entries_at(self, node: Node) -> list[EntryPoint]:
        if node.type in ("namespace_definition", "linkage_specification"):
            body = node.child_by_field_name("body")
            if body is not None and body.type == "function_definition":  # extern "C" __global__ void f(...)
                return self._entries_at(body)
            return [e for child in body.named_children for e in self._entries_at(child)] if body else []
        if node.type == "function_definition" and "__global__" in text(node).split("(", 1)[0]:
            name = declarator_name(node.child_by_field_name("declarator"))
            return [EntryPoint(name, node, self.main, Definition(node, self.main))]
        if node.type == "template_declaration":
            function = next((c for c in node.named_children if c.type == "function_definition"), None)
            if function is not None and "__global__" in text(function).split("(", 1)[0]:
                return self._template_entries(node, function)
        if node.type == "expression_statement" and node.named_children:
            call = node.named_children[0]
            if call.type == "call_expression" and text(call.child_by_field_name("function")) in self.macros:
                return self._macro_entry(call)
        return []

    def _template_entries(self, template: Node, function: Node) -> list[EntryPoint]:
        """The instances of a template `__global__` function the file launches (`f<64, true><<<...>>>(...)`),
        each named by its template arguments as written, blanks removed: `f<64,true>`."""
        name = declarator_name(function.child_by_field_name("declarator"))
        definition = Definition(function, self.main, _template_parameters(template))
        entries: dict[str, EntryPoint] = {}
        for node in walk(self.main.root):
            callee = node.child_by_field_name("function") if node.type == "call_expression" else None
            if callee is None or callee.type != "template_function" or text(callee.child_by_field_name("name")) != name \
                    or not any(c.type == "kernel_call_syntax" for c in node.children):
                continue
            arguments = callee.child_by_field_name("arguments")
            instance = name + "".join(text(arguments).split())
            entries.setdefault(instance, EntryPoint(instance, node, self.main, definition,
                                                    tuple(arguments.named_children)))
        return list(entries.values())

    def _macro_entry(self, call: Node) -> list[EntryPoint]:
        parameters, macro, _ = self.macros[text(call.child_by_field_name("function"))]
        body = text(macro.child_by_field_name("value")).replace("\\\n", "  \n")
        if "__global__" not in body:
            return []
        arguments = [text(a) for a in call.child_by_field_name("arguments").named_children]
        if len(arguments) != len(parameters):
            raise self.main.error(call, f"macro `{text(call.child_by_field_name('function'))}` takes "
                                        f"{len(parameters)} arguments, not {len(arguments)}")
        arguments_of = dict(zip(parameters, arguments))
        expanded = _substitute(body, arguments_of)
        # The expansion is parsed on its own; its positions are reported at the invocation.
        instance = parse_cuda(expanded.encode(), str(self.main.location(call)))
        function = next((n for n in walk(instance.root) if n.type == "function_definition"), None)
        if function is None:
            raise self.main.error(call, "the entry-point macro defines no function")
        # the macro's `__cluster_dims__` (blanked in the definition the expansion copies), on the function's line
        written = [dims for row, dims in self.main.cluster_dims.items()
                   if macro.start_point[0] <= row <= macro.end_point[0]]
        if written:
            instance = replace(instance, cluster_dims={function.start_point[0]: _substitute_all(written[0], arguments_of)})
        name = declarator_name(function.child_by_field_name("declarator"))
        return [EntryPoint(name, call, self.main, Definition(function, instance))]


def _substitute(body: str, arguments: dict[str, str]) -> str:
    """Macro parameters replaced by their arguments, token by token (identifiers only)."""
    import re

    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: arguments.get(m.group(), m.group()), body)


def _substitute_all(texts: tuple[str, ...], arguments: dict[str, str]) -> tuple[str, ...]:
    return tuple(_substitute(value, arguments) for value in texts)


def load_program(path: str | Path, include_dirs: tuple[Path, ...]) -> Program:
    """Parse `path` and the project headers it includes."""
    return Program(parse_cuda_file(path), include_dirs)


def unknown_entry(program: Program, name: str) -> CuBridgeError:
    names = ", ".join(entry.name for entry in program.entry_points()) or "none"
    return CuBridgeError(f"lift: no entry point `{name}` in {Path(program.main.path).name} (entry points: {names})",
                         program.main.path)
