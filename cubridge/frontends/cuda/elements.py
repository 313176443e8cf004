"""Register fragments: per-thread element code lifted to tile-level CuIR.

A fragment is the thread's share of a worker instance's register tile in the mma accumulator layout
(`FragmentLayout`): each of the instance's 4 warps holds `m_tiles` 16-row tiles of `n_tiles` 8-column
tiles, 4 registers each. `float s[64]` is the wgmma accumulator of a 64-row warp-group tile (m_tiles = 1:
element e of thread `tid` sits at row 16 * warp + lane / 4 + 8 * ((e >> 1) & 1) and column 8 * (e >> 2) +
2 * (lane % 4) + (e & 1)); `float s[M][N][4]` holds the mma.sync m16n8 accumulators of M x N sub-tiles per
warp, the same layout with m_tiles = M. A thread holds 2 * m_tiles rows (its row slots); `float alpha[2]`
and `float m[M][2]` hold one value per row slot, that is a row vector. The lifter runs the unrolled element
loops with symbolic element values (`Expr` trees, no ops emitted) and turns a fragment into CuIR only where a value
must exist (a GEMM operand, a loop-carried value, a store): all its elements must then be one function of
the element (one `cuir.map` whose body is that function); row values are `cuir.map`s over row vectors.

A per-thread accumulation over the elements of one of its rows (`sum += s[e]`, a chain of `fmaxf`) is
lifted as a whole-row `cuir.row_reduce`, and the quad reductions that complete such accumulations
(`row_reduce_max`, `row_reduce_sum`) are the identity at tile level: the lift assumes, as the reference
kernels do, that a partial accumulation reaches the rest of the program only through its quad reduction or
linearly (the running sum is quad-reduced in the epilogue).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerType, f32
from xdsl.ir import Block, Region, SSAValue

from cubridge.dialect.cuir import ConvertOp, FillOp, GatherOp, MapOp, RowReduceOp, YieldOp
from cubridge.dialect.types import RowVectorType, TileType
from cubridge.frontends.cuda.values import PerThread, Run, same_value


@dataclass(frozen=True, eq=False)
class Expr:
    """A symbolic element value: `op` applied to `args` (Expr, float, int, bool, SSA scalars)."""

    op: str
    args: tuple
    location: object = None


@dataclass(frozen=True)
class Elem:
    """Element `index` of the materialized fragment tile `tile`."""

    tile: SSAValue
    index: int


@dataclass(frozen=True)
class RowOf:
    """The value of row vector `rows` at the thread's row `half` (0: rows g, 1: rows g + 8)."""

    rows: SSAValue
    half: int


@dataclass(frozen=True, eq=False)
class Affine:
    """A run-time value plus a thread-dependent one (`group_row0 + 16 * warp + g`)."""

    base: object  # Run or int
    threads: np.ndarray


@dataclass(frozen=True)
class FragmentLayout:
    """The mma accumulator layout of a 4-warp worker instance's register tile: each warp holds `m_tiles`
    16-row tiles (its rows stacked warp after warp) of `n_tiles` 8-column tiles; register e of a thread is
    sub-tile e // 4 (row-major over m_tiles x n_tiles), entry e % 4 (rows lane / 4 and + 8, two columns)."""

    m_tiles: int
    n_tiles: int

    @property
    def rows(self) -> int:
        return 64 * self.m_tiles

    @property
    def slots(self) -> int:
        """Row values per thread: 2 rows of each of its 16-row tiles."""
        return 2 * self.m_tiles

    def slot(self, element: int) -> int:
        return 2 * (element // (4 * self.n_tiles)) + ((element % 4) >> 1)

    def slot_row(self, tid: np.ndarray, slot: int) -> np.ndarray:
        warp, lane = (tid % 128) // 32, tid % 32
        return 16 * self.m_tiles * warp + 16 * (slot // 2) + lane // 4 + 8 * (slot % 2)

    def col(self, tid: np.ndarray, element: int) -> np.ndarray:
        lane = tid % 32
        return 8 * ((element // 4) % self.n_tiles) + 2 * (lane % 4) + (element & 1)

    @staticmethod
    def of_tile(tile_type) -> FragmentLayout:
        """The layout of a float register tile of `tile_type` (its rows say m_tiles)."""
        rows, columns = tile_type.dims
        return FragmentLayout(rows // 64, columns // 8)


def wgmma_layout(count: int) -> FragmentLayout:
    """The wgmma accumulator layout of a `count`-register fragment (one 64-row tile per warp group)."""
    return FragmentLayout(1, max(count // 4, 1))


@dataclass(frozen=True)
class Position:
    """The element's tile-local row or column index (`axis`), divided by `divisor`, modulo `modulus` when
    non-zero: the position code of whole-tile library calls (`make_causal` on a 16x16 sub-tile)."""

    axis: str
    divisor: int = 1
    modulus: int = 0


_FLOAT_OPS = {"+": "addf", "-": "subf", "*": "mulf", "/": "divf"}
_INDEX_OPS = {"+": "addi", "-": "subi", "*": "muli", "/": "divsi", "%": "remsi"}
# int min / max / abs, an integer table's element, a float converted to int
_INDEX_FUNCTIONS = ("minsi", "maxsi", "absi", "gather_index", "fptosi")
_FLOAT_COMPARE = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}  # C's != holds for NaN
_INDEX_COMPARE = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
REDUCING = {"addf": "sum", "maxnumf": "max"}


def is_symbolic(value) -> bool:
    return isinstance(value, (Expr, Elem, RowOf, Affine, Position))


def has_thread_index(value) -> bool:
    """Whether `value` reads a thread's row or column index (an Affine) outside reduction chains."""
    if isinstance(value, (Affine, Position)):
        return True
    if isinstance(value, Expr) and not value.op.startswith("reduce:"):
        return any(has_thread_index(arg) for arg in value.args)
    return False


def element_layout(tid: np.ndarray, element: int, axis: str, of_row: bool, layout: FragmentLayout) -> np.ndarray:
    """Tile-local row or column of `element` (or of row slot `element`) for threads `tid` in `layout`."""
    slot = element if of_row else layout.slot(element)
    if axis == "row":
        return layout.slot_row(tid, slot)
    return layout.col(tid, element)


def free_elements(value, found: set[int] | None = None) -> set[int]:
    """Fragment elements `value` reads outside reduction chains (empty: a row-level value)."""
    found = set() if found is None else found
    if isinstance(value, Elem):
        found.add(value.index)
    elif isinstance(value, Expr) and not value.op.startswith("reduce:"):
        for arg in value.args:
            free_elements(arg, found)
    return found


def halves(value, found: set[int] | None = None) -> set[int]:
    """The row halves a row-level value reads."""
    found = set() if found is None else found
    if isinstance(value, RowOf):
        found.add(value.half)
    elif isinstance(value, Expr):
        if value.op.startswith("reduce:"):
            found.add(value.args[0])
        else:
            for arg in value.args:
                halves(arg, found)
    return found


class FragmentLifting:
    """The element half of the Lifter (mixed into it)."""

    # -------------------------------------------------------------------------------------------------
    # building expressions
    def symbolic_binary(self, operator: str, left, right, scope, node):
        location = self.location(scope, node)
        left, right = (Affine(0, v.values) if isinstance(v, PerThread) else v for v in (left, right))
        if operator in ("&&", "||"):
            if isinstance(left, bool) or isinstance(right, bool):
                constant, other = (left, right) if isinstance(left, bool) else (right, left)
                if operator == "||":
                    return True if constant else other
                return other if constant else False
            return Expr("ori" if operator == "||" else "andi", (left, right), location)
        if operator in ("==", "!=") and self._is_flag_like(left) and self._is_flag_like(right):
            return Expr("cmpi:" + _INDEX_COMPARE[operator], (left, right), location)  # (a < 0) != (b < 0)
        integer = self._is_index_like(left) and self._is_index_like(right)
        if operator in _FLOAT_COMPARE:
            if integer:
                return Expr("cmpi:" + _INDEX_COMPARE[operator], (left, right), location)
            return Expr("cmpf:" + _FLOAT_COMPARE[operator], (left, right), location)
        if integer:
            if operator not in _INDEX_OPS:
                raise self.unsupported(scope, node, f"operator `{operator}` on a fragment's positions")
            return Expr(_INDEX_OPS[operator], (left, right), location)
        if operator not in _FLOAT_OPS:
            raise self.unsupported(scope, node, f"operator `{operator}` on fragment elements")
        return Expr(_FLOAT_OPS[operator], (left, right), location)

    @staticmethod
    def _is_index_like(value) -> bool:
        if isinstance(value, Affine) or (isinstance(value, int) and not isinstance(value, bool)):
            return True
        if isinstance(value, Expr) and value.op == "select":  # floor_div's `... ? quotient - 1 : quotient`
            return FragmentLifting._is_index_like(value.args[1]) and FragmentLifting._is_index_like(value.args[2])
        if isinstance(value, Expr):
            return value.op in _INDEX_OPS.values() or value.op in _INDEX_FUNCTIONS
        return isinstance(value, Run) and isinstance(value.value.type, IndexType)

    @staticmethod
    def _is_flag_like(value) -> bool:
        """Whether `value` is a condition (i1): a comparison, a logical and / or of conditions, a bool literal."""
        if isinstance(value, bool):
            return True
        if isinstance(value, Expr) and value.op == "select":
            return FragmentLifting._is_flag_like(value.args[1]) and FragmentLifting._is_flag_like(value.args[2])
        if isinstance(value, Expr):
            return value.op.startswith(("cmpi:", "cmpf:")) or value.op in ("andi", "ori")
        return isinstance(value, Run) and value.value.type == IntegerType(1)

    def _add(self, base, offset: int, scope, node):
        if offset == 0:
            return base.value if isinstance(base, Run) else base
        if isinstance(base, int):
            return base + offset
        return self.binary("+", base, offset, scope, node).value

    # -------------------------------------------------------------------------------------------------
    # materialization
    def fragment_type(self, count: int, packed: bool, m_tiles: int = 1) -> TileType:
        columns = 2 * count * (2 if packed else 1) // m_tiles
        return TileType((64 * m_tiles, columns), self.element_type if packed else f32, self.worker.sym_name.data)

    def dominates(self, value: SSAValue) -> bool:
        """Whether `value` (materialized earlier) is visible where ops are emitted now: its block encloses
        the current one (a value made inside a branch or loop body is not reused after it)."""
        defining = value.owner if isinstance(value.owner, Block) else value.owner.parent_block()
        block = self.block
        while block is not None:
            if block is defining:
                return True
            parent = block.parent_op()
            block = parent.parent_block() if parent is not None else None
        return False

    @staticmethod
    def scalar_type(value_type):
        """The element type a map body sees for an input of `value_type`."""
        return value_type.element_type

    def rows_type(self, m_tiles: int = 1) -> RowVectorType:
        return RowVectorType(64 * m_tiles, f32, self.worker.sym_name.data)

    def materialize_fragment(self, cells: list, packed: bool, scope, node, name: str | None = None,
                             layout: FragmentLayout | None = None) -> SSAValue:
        """One tile value for a fragment's element values (`layout`: of its float elements; None: wgmma)."""
        values = [cell.value for cell in cells]
        if any(v is None for v in values):
            raise self.error(scope, node, f"fragment `{name or '?'}` is read before all its elements are set")
        layout = layout or wgmma_layout(len(values) * (2 if packed else 1))
        key = ("fragment", layout, tuple(id(v) if is_symbolic(v) else v for v in values))
        cache = self.materialized
        if key in cache and self.dominates(cache[key]):
            return cache[key]
        first = values[0]
        if isinstance(first, Elem) and all(isinstance(v, Elem) and v.tile is first.tile and v.index == e
                                           for e, v in enumerate(values)):
            return first.tile
        if packed:
            result = self._packed(values, scope, node, name, layout)
        elif all(isinstance(v, float) and v == first for v in values):
            op = FillOp(first, self.fragment_type(len(values), False, layout.m_tiles))
            result = self.emit(op, scope, node).result
        else:
            result = self._map(values, [e for e in range(len(values))], False, len(values), scope, node, layout)
        if name and result.name_hint is None:
            result.name_hint = name
        cache[key] = result
        return result

    def _packed(self, values: list, scope, node, name, layout: FragmentLayout) -> SSAValue:
        """Packed 16-bit pairs: element j = convert_pack(X[2j], X[2j+1]) of a fragment X is cuir.convert(X)."""
        if not all(isinstance(v, Expr) and v.op == "pack" for v in values):
            raise self.error(scope, node, f"packed fragment `{name}` is not a conversion of a float fragment")
        sources = [a for v in values for a in v.args]
        tile = self.materialize_fragment([_Cell(v) for v in sources], False, scope, node, layout=layout)
        op = ConvertOp(tile, self.fragment_type(len(values), True, layout.m_tiles))
        return _at(self.emit(op, scope, node), values[0].location).result

    def materialize_rows(self, pair: list, scope, node, name: str | None = None) -> SSAValue:
        """One row vector for the thread's row values (one per row slot: two per 16-row tile)."""
        if any(v is None for v in pair):
            raise self.error(scope, node, f"row values `{name or '?'}` read before all are set")
        key = ("rows", tuple(id(v) if is_symbolic(v) else v for v in pair))
        if key in self.materialized and self.dominates(self.materialized[key]):
            return self.materialized[key]
        first = pair[0]
        layout = FragmentLayout(len(pair) // 2, 1)
        if all(isinstance(v, RowOf) and v.rows is first.rows and v.half == slot for slot, v in enumerate(pair)):
            return first.rows
        if all(isinstance(v, float) and v == first for v in pair):
            result = self.emit(FillOp(first, self.rows_type(layout.m_tiles)), scope, node).result
        else:
            result = self._map(pair, list(range(len(pair))), True, len(pair), scope, node, layout)
        if name and result.name_hint is None:
            result.name_hint = name
        self.materialized[key] = result
        return result

    def _map(self, values: list, elements: list[int], of_rows: bool, count: int, scope, node,
             layout: FragmentLayout) -> SSAValue:
        """A cuir.map whose body computes every one of `values` (one per element or row slot)."""
        builder = _MapBuilder(self, of_rows, scope, node, layout)
        template = builder.zip(values, elements)
        result_type = self.rows_type(layout.m_tiles) if of_rows else self.fragment_type(count, False, layout.m_tiles)
        if isinstance(template, _Input) and builder.inputs[template.index].type == result_type:
            return builder.inputs[template.index]  # every element is the input's own: no map
        result = builder.build(template, result_type)
        _at(result.owner, next((v.location for v in values if isinstance(v, Expr)), None))
        self.fallback_names.append((result, self.common_name(values)))
        return result

    def common_name(self, values: list) -> str | None:
        """The C++ variable that held every one of `values` first (None: none, or not the same one)."""
        names = {self.expression_names.get(id(v), (None, None))[1] for v in values}
        return names.pop() if len(names) == 1 else None

    def reduce_rows(self, kind: str, elements: dict[int, object], init_pair, scope, node, location=None,
                    layout: FragmentLayout | None = None, name: str | None = None) -> SSAValue:
        count = max(elements) + 1
        if sorted(elements) != list(range(count)):
            raise self.error(scope, node, "a row accumulation that skips elements of the thread's rows")
        layout = layout or wgmma_layout(count)
        tile = self.materialize_fragment([_Cell(elements[e]) for e in range(count)], False, scope, node,
                                         layout=layout)
        init = self.materialize_rows(init_pair, scope, node) if init_pair is not None else None
        key = ("reduce", kind, tile, init)
        if key not in self.materialized or not self.dominates(self.materialized[key]):
            op = RowReduceOp(kind, tile, self.rows_type(layout.m_tiles), init)
            self.fallback_names.append((op.result, name))
            self.materialized[key] = _at(self.emit(op, scope, node), location).result
        return self.materialized[key]


def _split_constant(base) -> tuple[object, int]:
    """`x + c` (c a constant) as (x, c); a plain int as (0, int)."""
    if isinstance(base, int):
        return 0, base
    value = base.value if hasattr(base, "value") else base
    constant = 0
    while isinstance(value.owner, arith.AddiOp) and isinstance(value.owner.rhs.owner, arith.ConstantOp):
        constant += value.owner.rhs.owner.value.value.data
        value = value.owner.lhs
    return value, constant


def as_reduction(value: Expr, half: int) -> Expr:
    """A chain of `addf` (or `maxnumf`) over the elements of one of the thread's rows, with row-level
    addends, as a row reduction of that row (the addends its init)."""
    leaves, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Expr) and node.op == value.op and free_elements(node):
            stack.extend(reversed(node.args))
        else:
            leaves.append(node)
    elements = [leaf for leaf in leaves if free_elements(leaf)]
    row_level = [leaf for leaf in leaves if not free_elements(leaf) and not (
        isinstance(leaf, float) and ((value.op == "addf" and leaf == 0.0) or (value.op == "maxnumf" and leaf == float("-inf"))))]
    init = None
    for leaf in row_level:
        init = leaf if init is None else Expr(value.op, (init, leaf), value.location)
    return Expr("reduce:" + REDUCING[value.op], (half, tuple(elements), init), value.location)


def _at(op, location):
    """`op`, located where the element code it lifts was written (when known)."""
    if location is not None:
        op.location = location
    return op


@dataclass
class _Cell:
    value: object


@dataclass(frozen=True)
class _Input:
    index: int


@dataclass(frozen=True)
class _IndexArg:
    axis: str


class _MapBuilder:
    """Zips the values of all elements into one body template, collecting the map's inputs."""

    def __init__(self, lifter, of_rows: bool, scope, node, layout: FragmentLayout):
        self.lifter, self.of_rows, self.scope, self.node, self.layout = lifter, of_rows, scope, node, layout
        self.inputs: list[SSAValue] = []
        self.origins: dict[str, object] = {}
        self.origin_roots: dict[str, tuple[object, int]] = {}  # each axis's origin as (root, constant offset)
        self.local_axes: set[str] = set()  # axes read as tile-local positions (Position)

    def fail(self, why: str):
        return self.lifter.error(self.scope, self.node, f"fragment elements not lifted as one cuir.map: {why}")

    def _input(self, value: SSAValue) -> _Input:
        for i, existing in enumerate(self.inputs):
            if existing is value:
                return _Input(i)
        self.inputs.append(value)
        return _Input(len(self.inputs) - 1)

    def half_of(self, element: int) -> int:
        return element if self.of_rows else self.layout.slot(element)

    def zip(self, values: list, elements: list[int]):
        lifter = self.lifter
        first = values[0]
        if not self.of_rows and all(not free_elements(v) and not has_thread_index(v) for v in values) and \
                any(is_symbolic(v) for v in values):
            # a row-level value inside an element function: a row vector broadcast along its rows
            by_half: dict[int, object] = {}
            for v, e in zip(values, elements):
                h = self.half_of(e)
                if h in by_half and by_half[h] is not v and not _same(by_half[h], v):
                    raise self.fail("one row's elements see different row values")
                by_half[h] = v
            if sorted(by_half) != list(range(self.layout.slots)):
                raise self.fail("a row value of some of the thread's rows only")
            rows = lifter.materialize_rows([by_half[s] for s in range(self.layout.slots)], self.scope, self.node)
            return self._input(rows)
        if self.of_rows and all(isinstance(v, Expr) and v.op in REDUCING and free_elements(v) for v in values):
            values = [as_reduction(v, h) for v, h in zip(values, elements)]
        if self.of_rows and all(isinstance(v, Expr) and v.op.startswith("reduce:") for v in values):
            return self._input(self._reduction(values))
        if all(isinstance(v, Position) for v in values):
            if any(v != first for v in values):
                raise self.fail("elements read different positions")
            self.local_axes.add(first.axis)
            return ("position", first)
        if all(isinstance(v, Affine) for v in values):
            return self._index(values, elements)
        if all(isinstance(v, Elem) for v in values):
            if any(v.tile is not first.tile or v.index != e for v, e in zip(values, elements)):
                raise self.fail("elements read other elements' values")
            return self._input(first.tile)
        if all(isinstance(v, RowOf) for v in values):
            if any(v.rows is not first.rows or v.half != self.half_of(e) for v, e in zip(values, elements)):
                raise self.fail("rows read other rows' values")
            return self._input(first.rows)
        if all(isinstance(v, Expr) for v in values):
            if any(v.op != first.op or len(v.args) != len(first.args) for v in values):
                raise self.fail(f"`{first.op}` in one element, `{next(v.op for v in values if v.op != first.op)}` "
                                "in another")
            args = tuple(self.zip([v.args[i] for v in values], elements) for i in range(len(first.args)))
            return ("op", first.op, args, first.location)
        if all(not is_symbolic(v) for v in values):
            if any(not _same(v, first) for v in values):
                return self._element_constants(values, elements)
            return ("const", first)
        raise self.fail("elements computed differently")

    def _block_position(self, offsets: list, elements: list[int], ids):
        """(axis, divisor, remainder) with offsets[i] = layout(element i) // divisor + remainder (per thread:
        remainder an array), for the first axis and power-of-two divisor that fit; None if none does."""
        for axis in ("row", "col"):
            if axis == "col" and self.of_rows:
                continue
            divisor = 1
            while divisor <= 256:
                remainders = [offset - element_layout(ids, element, axis, self.of_rows, self.layout) // divisor
                              for offset, element in zip(offsets, elements)]
                if all(np.array_equal(r, remainders[0]) for r in remainders):
                    return axis, divisor, remainders[0]
                divisor *= 2
        return None

    def _element_constants(self, values: list, elements: list[int]):
        """Run-time integers that differ between elements by the element's block of rows or columns
        (`k_blk + j` on sub-tile j): their common root plus the position."""
        split = [_split_constant(v) for v in values]
        if any(isinstance(v, bool) or not isinstance(v, (int, Run)) for v in values) or \
                any(root is not split[0][0] for root, _ in split):
            raise self.fail("elements use different constants")
        ids = np.nonzero(self.lifter.active)[0]
        found = self._block_position([np.full(ids.size, c) for _, c in split], elements, ids)
        if found is None or not (found[2] == found[2][0]).all():
            raise self.fail("elements use different constants")
        axis, divisor, remainder = found
        self.local_axes.add(axis)
        base = self.lifter._add(Run(split[0][0]) if isinstance(split[0][0], SSAValue) else split[0][0],
                                int(remainder[0]), self.scope, self.node)
        return ("op", "addi", (("const", base if isinstance(base, int) else Run(base)),
                               ("position", Position(axis, divisor))), self.lifter.location(self.scope, self.node))

    def _index(self, values: list, elements: list[int]):
        """Thread indices that are one axis of the layout, at one origin, for every element."""
        lifter = self.lifter
        ids = np.nonzero(lifter.active)[0]
        for axis in ("row", "col"):
            if axis == "col" and self.of_rows:
                continue
            offsets = set()
            for value, element in zip(values, elements):
                difference = value.threads[ids] - element_layout(ids, element, axis, self.of_rows, self.layout)
                if not (difference == difference[0]).all():
                    break
                root, constant = _split_constant(value.base)
                offsets.add((root, int(difference[0]) + constant))
            else:
                if len(offsets) == 1:
                    return self._index_argument(axis, *next(iter(offsets)))
        return self._block_index(values, elements, ids)

    def _index_argument(self, axis: str, root, offset: int):
        """The map's index argument of `axis` as `root + offset`: the first such index sets the axis's origin,
        another of the same root is the argument plus the difference (`q_idx + 1` beside `q_idx`)."""
        lifter = self.lifter
        if axis not in self.origin_roots:
            self.origin_roots[axis] = (root, offset)
            self.origins[axis] = lifter._add(Run(root) if isinstance(root, SSAValue) else root, offset,
                                             self.scope, self.node)
            return _IndexArg(axis)
        first_root, first_offset = self.origin_roots[axis]
        if root is not first_root and not (isinstance(root, int) and root == first_root):
            raise self.fail(f"a thread's {axis} index at two origins")
        if offset == first_offset:
            return _IndexArg(axis)
        return ("op", "addi", (_IndexArg(axis), ("const", offset - first_offset)),
                lifter.location(self.scope, self.node))

    def _block_index(self, values: list, elements: list[int], ids):
        """A thread's index that is a block of the layout's rows or columns plus a per-warp-group value
        (`seq * 4 + warpid` is the 16-row block of the element's row): base + that value + the position."""
        if any(not _same(v.base, values[0].base) for v in values):
            raise self.fail("a thread's index that is no row or column of the fragment layout")
        found = self._block_position([v.threads[ids] for v in values], elements, ids)
        if found is None:
            raise self.fail("a thread's index that is no row or column of the fragment layout")
        axis, divisor, remainder = found
        lifter = self.lifter
        per_thread = np.zeros(lifter.threads, dtype=np.int64)
        per_thread[ids] = remainder
        offset = lifter.uniform(PerThread(per_thread), self.scope, self.node)
        base = lifter.binary("+", values[0].base, offset, self.scope, self.node)
        self.local_axes.add(axis)
        return ("op", "addi", (("const", base), ("position", Position(axis, divisor))),
                lifter.location(self.scope, self.node))

    def _reduction(self, values: list) -> SSAValue:
        """Row reductions of the two row halves: one cuir.row_reduce."""
        kind = values[0].op.split(":", 1)[1]
        elements: dict[int, object] = {}
        inits = [None] * len(values)
        halves_of: dict[int, int] = {}
        for value in values:
            half, leaves, init = value.args
            for leaf in leaves:
                (element,) = free_elements(leaf) or {None}
                if element is None or element in elements:
                    raise self.fail("a row accumulation mixes rows")
                elements[element] = leaf
                halves_of[element] = half
            inits[half] = init
        m_tiles = self.layout.m_tiles
        layout = FragmentLayout(m_tiles, (max(elements) + 1) // (4 * m_tiles))
        if any(layout.slot(element) != half for element, half in halves_of.items()):
            raise self.fail("a row accumulation mixes rows")
        init_pair = None if all(init is None for init in inits) else inits
        return self.lifter.reduce_rows(kind, elements, init_pair, self.scope, self.node, values[0].location, layout,
                                       self.lifter.common_name(values))

    def build(self, template, result_type) -> SSAValue:
        lifter = self.lifter
        input_types = [lifter.scalar_type(v.type) for v in self.inputs]
        index_count = 1 if self.of_rows else 2
        block = Block(arg_types=input_types + [IndexType()] * index_count)
        self.block = block
        result = self._emit(template)
        block.add_op(YieldOp(result))
        origin = []
        if self.origins:
            origin = [self._origin("row"), self._origin("col")] if not self.of_rows else [self._origin("row")]
        op = MapOp(self.inputs, origin, result_type, Region(block))
        return lifter.emit(op, self.scope, self.node).result

    def _position(self, position: Position) -> SSAValue:
        """The element's tile-local index (the index argument less the map's origin), divided, reduced."""
        block = self.block
        location = self.lifter.location(self.scope, self.node)  # where the map is made
        value = block.args[len(self.inputs) + (0 if position.axis == "row" else 1)]
        if position.axis in self.origins:
            local = _at(arith.SubiOp(value, self._origin(position.axis)), location)
            block.add_op(local)
            value = local.result
        for operation, constant in ((arith.DivSIOp, position.divisor), (arith.RemSIOp, position.modulus)):
            if constant > 1 or (operation is arith.RemSIOp and constant):
                literal = _at(arith.ConstantOp(arith.IntegerAttr(constant, IndexType())), location)
                op = _at(operation(value, literal.result), location)
                block.add_op(literal)
                block.add_op(op)
                value = op.result
        return value

    def _origin(self, axis: str) -> SSAValue:
        origin = self.origins.get(axis, 0)
        return origin if isinstance(origin, SSAValue) else self.lifter.index_constant(int(origin))

    def _emit(self, template) -> SSAValue:
        block = self.block
        if isinstance(template, _Input):
            return block.args[template.index]
        if isinstance(template, _IndexArg):
            return block.args[len(self.inputs) + (0 if template.axis == "row" else 1)]
        kind = template[0]
        if kind == "position":
            return self._position(template[1])
        if kind == "const":
            value = template[1]
            if isinstance(value, Run):
                return value.value
            if isinstance(value, bool):
                op = arith.ConstantOp(arith.IntegerAttr(int(value), IntegerType(1)))
            elif isinstance(value, float):
                op = arith.ConstantOp(FloatAttr(value, f32))
            else:
                op = arith.ConstantOp(arith.IntegerAttr(int(value), IndexType()))
            block.add_op(op)
            return op.result
        _, name, args, location = template
        operands = [self._emit(a) for a in args]
        op = scalar_op(name, operands)
        for created in op if isinstance(op, list) else [op]:
            created.location = location
            block.add_op(created)
        return (op[-1] if isinstance(op, list) else op).results[0]


def _same(a, b) -> bool:
    """Structural equality of element values (an expression recomputed per element is the same value)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, Expr):
        return a.op == b.op and len(a.args) == len(b.args) and all(_same(x, y) for x, y in zip(a.args, b.args))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Affine):
        return _same(a.base, b.base) and np.array_equal(a.threads, b.threads)
    if isinstance(a, Run):
        return same_value(a.value, b.value)
    return a == b


def scalar_op(name: str, operands: list[SSAValue]):
    """The op (or ops, the last giving the value) of element-code operation `name` on SSA `operands`."""
    if name == "gather":
        return GatherOp(operands[0], operands[1:])
    if name == "gather_index":  # an integer table's element, as an index
        gather = GatherOp(operands[0], operands[1:])
        return [gather, arith.IndexCastOp(gather.result, IndexType())]
    if name.startswith("cmpf:"):
        return arith.CmpfOp(operands[0], operands[1], name[5:])
    if name.startswith("cmpi:"):
        return arith.CmpiOp(operands[0], operands[1], name[5:])
    simple = {
        "addf": arith.AddfOp, "subf": arith.SubfOp, "mulf": arith.MulfOp, "divf": arith.DivfOp,
        "maxnumf": arith.MaxnumfOp, "minnumf": arith.MinnumfOp, "ori": arith.OrIOp, "andi": arith.AndIOp,
        "addi": arith.AddiOp, "subi": arith.SubiOp, "muli": arith.MuliOp, "divsi": arith.DivSIOp,
        "remsi": arith.RemSIOp, "minsi": arith.MinSIOp, "maxsi": arith.MaxSIOp, "atan2": math.Atan2Op,
        "copysign": math.CopySignOp,
    }
    if name in simple:
        return simple[name](operands[0], operands[1])
    if name == "select":
        return arith.SelectOp(operands[0], operands[1], operands[2])
    if name == "negf":
        return arith.NegfOp(operands[0])
    if name == "absi":
        return math.AbsIOp(operands[0])
    if name == "fptosi":  # a float as an index: through a 64-bit integer, as the transfer converts
        wide = arith.FPToSIOp(operands[0], IntegerType(64))
        return [wide, arith.IndexCastOp(wide.result, IndexType())]
    if name == "sitofp":  # an index as a float: through a 64-bit integer
        wide = arith.IndexCastOp(operands[0], IntegerType(64))
        return [wide, arith.SIToFPOp(wide.result, f32)]
    if name == "fma":
        product = arith.MulfOp(operands[0], operands[1])
        return [product, arith.AddfOp(product.result, operands[2])]
    if name == "powf":
        return math.PowFOp(operands[0], operands[1])
    unary = {"exp2": math.Exp2Op, "log": math.LogOp, "tanh": math.TanhOp, "exp": math.ExpOp, "log2": math.Log2Op,
             "sqrt": math.SqrtOp, "rsqrt": math.RsqrtOp, "absf": math.AbsFOp, "erf": math.ErfOp,
             "floor": math.FloorOp, "ceil": math.CeilOp, "trunc": math.TruncOp, "sin": math.SinOp, "cos": math.CosOp,
             "tan": math.TanOp, "asin": math.AsinOp, "acos": math.AcosOp, "atan": math.AtanOp, "sinh": math.SinhOp,
             "cosh": math.CoshOp, "roundeven": math.RoundEvenOp}
    if name in unary:
        return unary[name](operands[0])
    raise ValueError(f"no scalar op for `{name}`")
