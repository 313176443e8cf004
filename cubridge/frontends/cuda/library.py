"""The tile-library half of the Lifter (mixed into it): kernels written against a library of whole-tile calls
(ThunderKittens' `warp::mul(tile, tile, x)`, `warpgroup::mma_AB(o, p, v_smem[s])`) rather than against
per-element code and PTX primitives.

The profile names the library's types (`[types]`: register tiles, row vectors, shared tiles, semaphores,
tile coordinates, the shared-memory allocator), its compile-time constants and thread-index functions, and
gives each call an explicit CuIR op and argument roles (`[primitives]` rows that are tables). A register tile
of one warp (16 rows) is the warp's share of the warp group's 64-row tile, so its values are the same
fragments the element lifting uses (elements in the wgmma accumulator layout, docs/lifting-profiles.md):
whole-tile calls set every element symbolically, and a tile becomes CuIR where a value must exist, as with
per-element code. Row vectors (`col_vec<rt_fl<16, N>>`) are row pairs.

Kernels launched one program per work tile (`[tile_scheduler] schedule = "grid"`) are lifted once per
worker role: the statements before the role split run at kernel level only for their allocations and
mbarrier inits, and are lifted again at the start of each role's `cuir.for_each_tile` body, where
`blockIdx` is the work tile (`[tile_scheduler] grid`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, CallSiteLoc, Float16Type, Float32Type, IndexType, IntegerAttr
from xdsl.ir import Block, Region

from cubridge.dialect.cuir import (
    AllocOp,
    BarrierOp,
    ConvertOp,
    FenceAsyncSharedOp,
    ForEachTileOp,
    GemmAsyncOp,
    GemmFenceOp,
    StoreOp,
    WaitGroupOp,
    YieldOp,
)
from cubridge.dialect.types import SharedBufferType, TileType
from cubridge.frontends.cuda.elements import Expr, Position, RowOf, element_layout, wgmma_layout
from cubridge.frontends.cuda.program import declarator_name, text
from cubridge.frontends.cuda.source import parse_cuda
from cubridge.frontends.cuda.values import ArrayValue, Cell, FunctionValue, PerThread, Run, Scope, SharedRef, TypeValue

FRAGMENT_ROWS_PER_WARP = 16  # a warp's register tile in the wgmma accumulator layout
_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>]*>")


@dataclass(frozen=True)
class SharedArray:
    """Tiles or semaphores of shared memory indexed by stage (`k_smem[s]`, `compute_done[s]`)."""

    name: str


@dataclass(frozen=True)
class TileCoordinate:
    """`coord<T>{b, d, r, c}`: a position in units of tile T's rows and columns."""

    tile: TypeValue
    values: tuple


@dataclass(frozen=True)
class Allocator:
    """The library's shared-memory allocator object."""


@dataclass(frozen=True)
class Allocation:
    """`allocator.allocate<T, N>()` before a declaration names it."""

    tile: TypeValue
    count: int


@dataclass(frozen=True)
class BaseTiles:
    """`tile.tiles` of a register tile (its 16x16 base tiles), indexed [row block] when `row` is set."""

    tile: ArrayValue
    row: int | None = None


@dataclass(frozen=True)
class Omitted:
    """A value the profile leaves out of the lift (with its reason); calls that use it are left out too."""

    name: str
    reason: str


class LibraryLifting:
    """Tile-library calls, types and grid-launched kernels (mixed into the Lifter)."""

    # =====================================================================================================
    # names: qualified library calls, constants, thread-index functions
    def library_name(self, node: Node, scope) -> object | None:
        """The profile's meaning of a qualified name (`warp::mul`, `kittens::WARP_THREADS`), or None."""
        name = self._library_key(text(node))
        if name in self.profile.section("constants"):
            return self.profile.section("constants")[name]
        types = self.profile.section("types")
        if name in (types.get("semaphore"), types.get("coordinate")):
            return TypeValue(name, self._final_template_arguments(node, scope))
        if name in self.profile.section("primitives") or name in self.profile.section("functions"):
            return FunctionValue(name, self._final_template_arguments(node, scope))
        outer = node.child_by_field_name("scope") if node.type == "qualified_identifier" else None
        if outer is not None and outer.type == "namespace_identifier" and self._library_key(text(outer)) in \
                {key.split("::")[0] for key in self.profile.section("primitives") if "::" in key}:
            raise self.error(scope, node, f"unknown name `{name}`: not in profile {self.profile.name}")
        return None

    def _final_template_arguments(self, node: Node, scope) -> tuple:
        """The template arguments of a qualified name's last part: (32,) of `warpgroup::decrease_registers<32>`."""
        while node.type == "qualified_identifier" and node.child_by_field_name("name") is not None:
            node = node.child_by_field_name("name")
        if node.type != "template_function":
            return ()
        return self.template_arguments(node.child_by_field_name("arguments"), scope)

    def _library_key(self, spelled: str) -> str:
        """`kittens::warpgroup::mma_AB<...>` -> `warpgroup::mma_AB`: blanks, template arguments and the
        vocabulary's namespace removed."""
        key = "".join(spelled.split())
        while _TEMPLATE_ARGUMENTS.search(key):
            key = _TEMPLATE_ARGUMENTS.sub("", key)
        namespace = self.profile.section("vocabulary").get("namespace")
        if namespace and key.startswith(namespace + "::"):
            key = key[len(namespace) + 2:]
        return key

    def library_function(self, name: str, scope, node: Node):
        """A `[functions]` row: a constant, or a C++ expression in `threadIdx.x` (a thread-index function)."""
        definition = self.profile.section("functions")[name]
        if isinstance(definition, (int, float)):
            return definition
        return self.profile_expression(definition, self.empty_scope(), node)

    def empty_scope(self):
        return Scope(None, source=self.program.main)

    def profile_expression(self, expression: str, scope, node: Node):
        """A C++ expression the profile spells (evaluated in `scope`; errors name the profile)."""
        source = parse_cuda(f"auto __profile__ = {expression};".encode(), str(self.profile.path))
        value_node = source.root.named_children[0].children_by_field_name("declarator")[0] \
            .child_by_field_name("value")
        inner = type(scope)(scope, source=source)
        return self.value(value_node, inner)

    # =====================================================================================================
    # library types
    def library_type(self, declared) -> str | None:
        """Which library type `declared` is: register_tile, vector, shared_tile, semaphore, coordinate,
        allocator (None: not one)."""
        if not isinstance(declared, TypeValue):
            return None
        types = self.profile.section("types")
        if declared.name in types.get("register_tile", {}):
            return "register_tile"
        if declared.name in types.get("shared_tile", {}):
            return "shared_tile"
        for kind in ("vector", "semaphore", "coordinate"):
            if declared.name == types.get(kind):
                return kind
        if declared.name == types.get("allocator", {}).get("struct"):
            return "allocator"
        return None

    def library_declaration(self, declared, declarator: Node, scope, node: Node):
        """The value a declaration of a library type binds (None: not a library type)."""
        kind = self.library_type(declared)
        if kind is None:
            return None
        name = declarator_name(declarator)
        if kind == "allocator":
            return Allocator()
        if kind == "semaphore":
            return SharedArray(name) if declarator.type == "array_declarator" else SharedRef(name)
        value_node = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        if kind == "coordinate":
            if value_node is None or value_node.type != "initializer_list":
                raise self.error(scope, node, f"a tile coordinate `{name}` without its {{b, d, r, c}} initializer")
            values = tuple(self.value(v, scope) for v in value_node.named_children)
            return TileCoordinate(declared.arguments[0], values)
        if value_node is not None:
            raise self.unsupported(scope, node, "initialized register tile")
        return self.register_value(declared, name, scope, node)

    def register_value(self, declared: TypeValue, name: str, scope, node: Node) -> ArrayValue:
        """A warp's register tile as the fragment of the warp group's tile, or a row vector as row pairs."""
        kind = self.library_type(declared)
        if kind == "vector":
            tile = declared.arguments[0] if declared.arguments else None
            if self.library_type(tile) != "register_tile":
                raise self.error(scope, node, f"`{name}`: a vector of `{tile}` has no register form")
            self.register_value(tile, name, scope, node)  # its shape checks
            return ArrayValue([Cell(name, None) for _ in range(2)], "rows", name)
        rows, columns = (int(a) for a in declared.arguments[:2])
        if rows != FRAGMENT_ROWS_PER_WARP:
            raise self.error(scope, node, f"`{name}`: a {rows}-row register tile; the lift takes a warp's "
                                          f"{FRAGMENT_ROWS_PER_WARP} rows of a warp-group tile")
        element = self.profile.section("types")["register_tile"][declared.name]
        count = rows * columns // 32
        if element == "f32":
            return ArrayValue([Cell(name, None) for _ in range(count)], "fragment", name)
        return ArrayValue([Cell(name, None) for _ in range(count // 2)], "packed", name)

    def tile_shape(self, tile: TypeValue, scope, node: Node) -> tuple[int, int]:
        if self.library_type(tile) not in ("shared_tile", "register_tile"):
            raise self.error(scope, node, f"`{tile}` is not a tile type of profile {self.profile.name}")
        return int(tile.arguments[0]), int(tile.arguments[1])

    def library_sizeof(self, value, scope, node: Node) -> int:
        """sizeof of a shared tile type or of a shared allocation (all its stages)."""
        if isinstance(value, SharedArray) and value.name in self.shared:
            return self.shared[value.name].type.total_bytes
        if isinstance(value, TypeValue) and self.library_type(value) == "shared_tile":
            rows, columns = self.tile_shape(value, scope, node)
            element = self.profile.section("types")["shared_tile"][value.name]
            return rows * columns * (4 if element == "f32" else 2)
        raise self.unsupported(scope, node, "sizeof")

    # =====================================================================================================
    # shared memory: the allocator and its allocations
    def allocate(self, method: str, template_arguments: tuple, scope, node: Node) -> Allocation:
        allocator = self.profile.section("types")["allocator"]
        if method != allocator.get("method"):
            raise self.error(scope, node, f"allocator method `{method}` is not in profile {self.profile.name}")
        if len(template_arguments) != 2 or not isinstance(template_arguments[1], int):
            raise self.error(scope, node, f"`{method}` takes a tile type and a constant count")
        return Allocation(template_arguments[0], template_arguments[1])

    def bind_allocation(self, name: str, allocation: Allocation, scope, node: Node):
        """The named allocation's shared array (its `cuir.alloc` made once; an omitted one for a type CuIR
        holds no shared form of)."""
        tile = allocation.tile
        if self.library_type(tile) == "vector":
            reason = self.profile.section("omit").get(name)
            if reason is None:
                raise self.error(scope, node, f"`{name}`: shared vectors have no CuIR form; profile "
                                              f"{self.profile.name} must omit them (`[omit]`)")
            return Omitted(name, reason)
        if name not in self.shared:
            rows, columns = self.tile_shape(tile, scope, node)
            element = self.element_type_named(self.profile.section("types")["shared_tile"][tile.name])
            buffer_type = SharedBufferType((rows, columns), element, stages=allocation.count, swizzle=128)
            op = AllocOp(buffer_type)
            op.result.name_hint = name
            op.location = self.location(scope, node)
            self.kernel.body.block.add_op(op)
            self.shared[name] = op.result
        return SharedArray(name)

    def element_type_named(self, name: str):
        return {"bf16": BFloat16Type(), "f16": Float16Type(), "f32": Float32Type()}[name]

    def reference_array_declaration(self, node: Node, scope) -> bool:
        """`T (&name)[N] = allocator.allocate<T, N>();`, which tree-sitter-cuda 0.21 parses as an assignment
        to a call subscript: declared here. False when `node` is not one."""
        expression = node.named_children[0] if node.named_children else None
        if expression is None or expression.type != "assignment_expression":
            return False
        left = expression.child_by_field_name("left")
        call = left.child_by_field_name("argument") if left.type == "subscript_expression" else None
        if call is None or call.type != "call_expression":
            return False
        function, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        referenced = arguments.named_children[0] if len(arguments.named_children) == 1 else None
        if function.type != "identifier" or referenced is None or referenced.type != "pointer_expression" or \
                text(referenced.child_by_field_name("operator")) != "&":
            return False
        try:
            declared = scope.lookup(text(function))
        except KeyError:
            return False
        if not isinstance(declared, Cell) or self.library_type(declared.value) is None:
            return False
        name = text(referenced.child_by_field_name("argument"))
        value = self.value(expression.child_by_field_name("right"), scope)
        if not isinstance(value, Allocation):
            raise self.unsupported(scope, node, "reference-to-array declaration")
        scope.names[name] = Cell(name, self.bind_allocation(name, value, scope, node), mutable=False)
        return True

    def shared_element(self, array: SharedArray | Omitted, index, scope, node: Node) -> SharedRef | Omitted:
        if isinstance(array, Omitted):
            return array
        if isinstance(index, PerThread):
            index = self.uniform(index, scope, node)
        buffer = self.shared.get(array.name)
        if buffer is not None and buffer.type.stages.data == 1:  # one tile: no stage index
            if index != 0:
                raise self.error(scope, node, f"`{array.name}` holds one tile; index {index} is past it")
            index = None
        return SharedRef(array.name, index)

    def base_tile(self, tiles: BaseTiles, index, scope, node: Node):
        """`tile.tiles[i][j]`: the 16x16 base tile (i, j) of a warp's register tile, as a view of its
        fragment's elements (the ones whose tile-local row and column fall in that block)."""
        if not isinstance(index, int):
            raise self.error(scope, node, "a base tile at a run-time index")
        if tiles.row is None:
            return BaseTiles(tiles.tile, index)
        fragment = tiles.tile
        if fragment.kind != "fragment":
            raise self.error(scope, node, f"base tiles of `{fragment.name}`, which is not a float register tile")
        if tiles.row != 0:  # a warp's tile is one row of base tiles: its 16 rows
            raise self.error(scope, node, f"`{fragment.name}` has no base tile ({tiles.row}, {index})")
        ids, layout = np.nonzero(self.active)[0], wgmma_layout(len(fragment.cells))
        chosen = [element for element in range(len(fragment.cells))
                  if (element_layout(ids, element, "col", False, layout) // FRAGMENT_ROWS_PER_WARP == index).all()]
        if not chosen:
            raise self.error(scope, node, f"`{fragment.name}` has no base tile ({tiles.row}, {index})")
        return ArrayValue([fragment.cells[e] for e in chosen], "fragment", fragment.name)  # its cells, shared

    # =====================================================================================================
    # calls with an explicit op
    def library_call(self, callee, entry: dict, arguments: list[Node], scope, node: Node):
        op_name, roles = entry["op"], list(entry["roles"])
        if len(arguments) != len(roles):
            raise self.error(scope, node, f"`{callee.name}` takes {len(roles)} arguments in profile "
                                          f"{self.profile.name}, not {len(arguments)}")
        values = {role: self.value(argument, scope) for role, argument in zip(roles, arguments)}
        omitted = [v for v in values.values() if isinstance(v, Omitted)]
        if omitted:
            self.omitted_calls.append((omitted[0], self.location(scope, node), callee.name))
            return None
        if self.kernel_pass and op_name != "cuir.mbarrier_init":
            return None  # lifted in each worker (grid kernels)
        if self.replaying and op_name == "cuir.mbarrier_init":
            return None  # made at kernel level
        if "tx_count" in values:
            values["count"] = values["count"] + values.pop("tx_count")
        if "coord" in values:
            values.update(self._coordinates(values.pop("coord"), values.get("dest", values.get("source")),
                                            scope, node))
        for role, fixed in entry.get("fixed", {}).items():
            values[role] = fixed
        saved, self.issue_scope = self.issue_scope, entry.get("issue", "thread")
        try:
            if op_name in ("cuir.copy_async", "cuir.store_async"):
                self._single_issuer(callee.name, scope, node)
            if entry.get("fence") and op_name == "cuir.store_async":
                self.emit(FenceAsyncSharedOp(), scope, node)
            op = op_name.removeprefix("cuir.")
            if hasattr(self, "_lib_" + op):  # whole-tile semantics, read from the row
                result = getattr(self, "_lib_" + op)(callee, values, entry, scope, node)
            elif hasattr(self, "_op_" + op):  # the project primitives' op builders
                result = getattr(self, "_op_" + op)(callee, values, scope, node)
            else:
                raise self.error(scope, node, f"`{callee.name}` ({op_name}) is not lifted")
            if entry.get("commit"):
                self._prim_store_async_commit(callee, {}, scope, node)
        finally:
            self.issue_scope = saved
        return result

    def _coordinates(self, coordinate, ref, scope, node: Node) -> dict:
        """A tile coordinate {b, d, r, c} as element coordinates c0 (innermost) .. c3."""
        if not isinstance(coordinate, TileCoordinate) or len(coordinate.values) != 4:
            raise self.error(scope, node, "a TMA transfer whose position is not a 4-part tile coordinate")
        rows, columns = self.tile_shape(coordinate.tile, scope, node)
        if isinstance(ref, SharedRef) and ref.name in self.shared and \
                tuple(self.shared[ref.name].type.dims) != (rows, columns):
            raise self.error(scope, node, f"a coordinate in units of {rows}x{columns} tiles for `{ref.name}`")
        b, d, r, c = coordinate.values
        return {"c3": b, "c2": d, "c1": self.binary("*", r, rows, scope, node),
                "c0": self.binary("*", c, columns, scope, node)}

    def _single_issuer(self, name: str, scope, node: Node) -> None:
        if self._issuers_per_instance() != 1:
            raise self.error(scope, node, f"`{name}` issued by {self._issuers_per_instance()} "
                                          f"{self.issue_scope}s of a warp group: a transfer each")

    def _lib_barrier(self, callee, values, entry, scope, node: Node):
        if self.worker is None:
            return None
        if not self.replaying:
            raise self.error(scope, node, "a block-wide barrier inside a worker role")
        self.emit(BarrierOp(), scope, node)

    def _lib_mbarrier_arrive(self, callee, values, entry, scope, node: Node):
        if values.get("count", 1) != 1:
            raise self.error(scope, node, "an mbarrier arrival counted more than once")
        self._op_mbarrier_arrive(callee, values, scope, node)

    def _lib_wait_group(self, callee, values, entry, scope, node: Node):
        if callee.template_arguments not in ((), (0,)):
            raise self.error(scope, node, f"`{callee.name}<N>` with N > 0 groups left pending is not lifted")
        token = self.worker_state["store"].value
        if token is None:
            raise self.error(scope, node, f"`{callee.name}` with no store group committed")
        self.emit(WaitGroupOp(token.value), scope, node)

    def _lib_gemm_wait(self, callee, values, entry, scope, node: Node):
        pending = callee.template_arguments[0] if callee.template_arguments else 0
        return self._wait(FunctionValue("gemm_wait", (pending,)), scope, node)

    def _lib_worker(self, callee, values, entry, scope, node: Node):
        if self.worker is None or len(callee.template_arguments) != 1:
            raise self.error(scope, node, f"`{callee.name}<registers>` outside a worker role")
        self.role_registers = int(callee.template_arguments[0])

    # -------------------------------------------------------------------------------------------------
    # register tiles
    def _tile_argument(self, value, kinds: tuple[str, ...], what: str, callee, scope, node: Node) -> ArrayValue:
        if not isinstance(value, ArrayValue) or value.kind not in kinds:
            raise self.error(scope, node, f"the {what} of `{callee.name}` is not a register "
                                          f"{'vector' if kinds == ('rows',) else 'tile'}")
        return value

    def _lib_fill(self, callee, values, entry, scope, node: Node):
        dest = self._tile_argument(values["dest"], ("fragment", "rows"), "destination", callee, scope, node)
        for cell in dest.cells:
            cell.value = float(entry["fill"])

    def _lib_map(self, callee, values, entry, scope, node: Node):
        """Element-wise: dest = f(x[, y]) with y a scalar, a tile of dest's shape or a row vector."""
        dest = values["dest"]
        if not isinstance(dest, ArrayValue) or dest.kind not in ("fragment", "packed", "rows"):
            raise self.error(scope, node, f"the destination of `{callee.name}` is not a register tile or vector")
        function = entry["map"]
        operands = [values[role] for role in ("x", "y") if role in values]
        if entry.get("y") == "rows":  # the *_row calls: y is one value per row
            self._tile_argument(values["y"], ("rows",), "row operand", callee, scope, node)
        location = self.location(scope, node)
        if dest.kind == "packed":  # a conversion: pairs of a float tile
            source = self._tile_argument(operands[0], ("fragment",), "source", callee, scope, node)
            if function != "copy" or len(source.cells) != 2 * len(dest.cells):
                raise self.error(scope, node, f"`{callee.name}` into a 16-bit tile converts a float tile of its shape")
            new = [None if None in (source.cells[2 * j].value, source.cells[2 * j + 1].value) else
                   Expr("pack", (source.cells[2 * j].value, source.cells[2 * j + 1].value), location)
                   for j in range(len(dest.cells))]
        elif function == "above_diagonal":  # y above the diagonal of each 16x16 base tile, x on and below it
            above = Expr("cmpi:sgt", (Position("col", 1, FRAGMENT_ROWS_PER_WARP),
                                      Position("row", 1, FRAGMENT_ROWS_PER_WARP)), location)
            x, y = ([self._operand(o, e, dest, callee, scope, node) for e in range(len(dest.cells))]
                    for o in operands)
            new = [None if None in (a, b) else Expr("select", (above, b, a), location) for a, b in zip(x, y)]
        else:
            new = [self._element(function, [self._operand(o, e, dest, callee, scope, node) for o in operands],
                                 location) for e in range(len(dest.cells))]
        for cell, value in zip(dest.cells, new):
            cell.value = value

    def _operand(self, value, element: int, dest: ArrayValue, callee, scope, node: Node):
        """Element `element` of dest's shape read from an operand (broadcasting scalars and row vectors)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, Run):
            return value
        if isinstance(value, ArrayValue) and value.kind == dest.kind and len(value.cells) == len(dest.cells):
            return value.cells[element].value
        if isinstance(value, ArrayValue) and value.kind == "rows" and dest.kind == "fragment":
            return value.cells[(element >> 1) & 1].value
        raise self.error(scope, node, f"an operand of `{callee.name}` that is neither a scalar, a "
                                      f"{'vector' if dest.kind == 'rows' else 'tile'} of its shape nor a row vector")

    @staticmethod
    def _element(function: str, operands: list, location):
        if any(o is None for o in operands):
            return None  # read before set: an error where it must exist
        if function == "copy":
            return operands[0]
        return Expr(function, tuple(operands), location)

    def _lib_row_reduce(self, callee, values, entry, scope, node: Node):
        """dest = the rows' `reduce` over x, folded into `init`."""
        dest = self._tile_argument(values["dest"], ("rows",), "destination", callee, scope, node)
        tile = self._tile_argument(values["x"], ("fragment",), "source", callee, scope, node)
        init = self._tile_argument(values["init"], ("rows",), "initial value", callee, scope, node)
        elements = {e: cell.value for e, cell in enumerate(tile.cells)}
        if any(v is None for v in elements.values()):
            raise self.error(scope, node, f"`{tile.name}` is read before all its elements are set")
        self.materialize_fragment(tile.cells, False, scope, node, tile.name)  # named after its variables
        self.materialize_rows([c.value for c in init.cells], scope, node, init.name)
        rows = self.reduce_rows(entry["reduce"], elements, [c.value for c in init.cells], scope, node,
                                self.location(scope, node))
        if rows.name_hint is None:
            rows.name_hint = dest.name
        for half, cell in enumerate(dest.cells):
            cell.value = RowOf(rows, half)

    # -------------------------------------------------------------------------------------------------
    # tensor-core GEMMs and stores of whole tiles
    def _lib_gemm_async(self, callee, values, entry, scope, node: Node):
        acc = self._tile_argument(values["acc"], ("fragment",), "accumulator", callee, scope, node)
        if isinstance(values["a"], ArrayValue):
            a = self._tile_argument(values["a"], ("packed",), "A operand", callee, scope, node)
            lhs, lhs_stage = self.materialize_fragment(a.cells, True, scope, node, a.name), None
        else:
            lhs, lhs_stage = self._shared_operand(values["a"], scope, node)
        rhs, rhs_stage = self._shared_operand(values["b"], scope, node)
        accumulate = entry.get("accumulate", True)
        acc_value = self.materialize_fragment(acc.cells, False, scope, node, acc.name) if accumulate else None
        if entry.get("fence"):
            self.emit(GemmFenceOp(), scope, node)
        op = GemmAsyncOp(entry["layout"], lhs, lhs_stage, rhs, rhs_stage,
                         self.fragment_type(len(acc.cells), False), acc_value)
        self._issue(op, acc, scope, node)

    def _lib_store(self, callee, values, entry, scope, node: Node):
        """A register tile into a shared tile (converted to its element type)."""
        ref = values["dest"]
        tile = self._tile_argument(values["value"], ("fragment",), "value", callee, scope, node)
        buffer, stage = self._shared_operand(ref, scope, node)
        value = self.materialize_fragment(tile.cells, False, scope, node, tile.name)
        if value.type.dims != tuple(buffer.type.dims):
            raise self.error(scope, node, f"a {value.type.dims} tile stored into `{ref.name}` of "
                                          f"{tuple(buffer.type.dims)}")
        if value.type.element_type != buffer.type.element_type:
            converted = ConvertOp(value, TileType(value.type.dims, buffer.type.element_type,
                                                  self.worker.sym_name.data))
            value = self.emit(converted, scope, node).result
        self.emit(StoreOp(value, buffer, [stage] if stage is not None else []), scope, node)

    # =====================================================================================================
    # threads and work tiles
    def instance_subset(self, taken: np.ndarray):
        """The worker instances with a thread in `taken`, when not every instance has one (else None)."""
        begin = self.worker.thread_range[0]
        width = self.profile.warp_group_threads
        active = {int(i) for i in (np.nonzero(self.active)[0] - begin) // width}
        chosen = {int(i) for i in (np.nonzero(taken & self.active)[0] - begin) // width}
        return sorted(chosen) if chosen != active else None

    def instance_condition(self, instances: list[int], scope, node: Node) -> Run:
        """`instance == i0 || instance == i1 ...` of the current worker."""
        index = Run(self.worker.body.block.args[0])
        condition = None
        for instance in instances:
            equal = self.binary_run("==", index, instance, scope, node)
            condition = equal if condition is None else Run(self.emit(arith.OrIOp(condition.value, equal.value),
                                                                      scope, node).result)
        return condition

    def work_tile_index(self, field: str, scope, node: Node):
        """`blockIdx.<field>` of a grid-launched kernel: a coordinate of the work tile."""
        grid = self.profile.section("tile_scheduler").get("grid", [])
        if field not in grid:
            raise self.unsupported(scope, node, f"blockIdx.{field} outside the tile scheduler")
        if self.kernel_pass:  # a stand-in: the kernel pass keeps no run-time value
            stand_in = arith.ConstantOp(IntegerAttr(0, IndexType()))
            self.block.add_op(stand_in)
            return Run(stand_in.result)
        if self._tile_decodes is None:
            raise self.error(scope, node, f"blockIdx.{field} outside any worker role")
        return Run(self._tile_decodes[grid.index(field)])

    def grid_worker_body(self, branch: Node, role_scope, scope) -> None:
        """A grid kernel's role: one `cuir.for_each_tile` body with the kernel-level statements before the
        role split, then the role's branch."""
        loop = ForEachTileOp([], Region(Block(arg_types=[IndexType()] * 3)))
        self.emit(loop, role_scope, branch)
        loop.location = self.location(scope, branch)
        saved, self.block = self.block, loop.body.block
        for argument, name in zip(loop.body.block.args, ("q_tile", "head", "batch")):
            argument.name_hint = name
        self._tile_decodes = loop.body.block.args[:3]
        kernel_pass, self.kernel_pass = self.kernel_pass, False  # the role split runs in the kernel pass
        self.replaying = True
        tile_scope = Scope(role_scope)
        try:
            for statement in self.kernel_prefix:
                self.execute(statement, tile_scope)
            self.replaying = False
            self.execute(branch, tile_scope)
        finally:
            self.replaying = False
            self.kernel_pass = kernel_pass
            self._tile_decodes = None
            self.block = saved
        loop.body.block.add_op(YieldOp())

    def run_kernel_body(self, body: Node, scope) -> None:
        """A grid kernel's body: statements run at kernel level (allocations, inits) until one splits the
        block into roles; the ones before it are lifted again in each role (`grid_worker_body`)."""
        self.kernel_prefix = []
        inner = Scope(scope)
        for statement in body.named_children:
            sandbox, self.block = self.block, Block()
            self.kernel_pass = True
            workers = len(self.kernel.workers)
            try:
                self.execute(statement, inner)
            finally:
                self.kernel_pass = False
                discarded, self.block = self.block, sandbox
            if len(self.kernel.workers) == workers:
                self.kernel_prefix.append(statement)
            for op in reversed(list(discarded.ops)):  # run-time values of the kernel pass: lifted per role
                op.detach()
                op.erase(safe_erase=False)


def omitted_note(calls: list) -> str | None:
    """The note that says which calls the profile's omissions left out of the lift."""
    if not calls:
        return None
    names = sorted({omitted.name for omitted, _, _ in calls})
    reasons = "; ".join(f"`{name}`: {next(o.reason for o, _, _ in calls if o.name == name)}" for name in names)
    places = ", ".join(f"{callee} at {_short(location)}" for _, location, callee in calls)
    return f"note: left out by the profile's [omit] ({reasons}): {places}"


def _short(location) -> str:
    while isinstance(location, CallSiteLoc):
        location = location.callee
    return f"{location.filename.data.rsplit('/', 1)[-1]}:{location.line.data}:{location.column.data}"
