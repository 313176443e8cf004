"""The Ampere half of the lifter (mixed into it): mma.sync fragment loops, ldmatrix operands, cp.async
groups, shared tiles carved out of `extern __shared__` with pointer arithmetic, global tensors addressed
through parameter strides, and the one-tile-per-block grid.

mma.sync works on 16x8 sub-tiles: a kernel loads A and B operand registers with ldmatrix (one 16x16 block
per call) and accumulates each sub-tile with one call per 16-wide K slice, in unrolled loops. The lifter runs
those loops symbolically: a register loaded by ldmatrix is an `OperandLoad` (which block of which shared
tile), an accumulator register a `GemmChain` (its initial value and the K slices added to it). When the
outermost unrolled loop ends, every accumulator array that mma.sync wrote must be one whole-tile GEMM: each
register's sub-tile at its own place of the operands (A rows = accumulator rows, B's n = accumulator
columns), every K slice once; it becomes `cuir.load`s of the shared operands (or, for A in registers, the
`cuir.convert` of the float fragment whose packed pairs they are) and one `cuir.gemm`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Block, Region, SSAValue

from cubridge.dialect.attributes import ScheduleAttr, TileOrderAttr, enum_attr
from cubridge.dialect.cuir import (
    BarrierOp,
    CommitGroupOp,
    CopyAsyncOp,
    CopyOp,
    DimOp,
    ForEachTileOp,
    GemmOp,
    LoadOp,
    StoreOp,
    WaitGroupOp,
    WorkerOp,
    YieldOp,
    AllocOp,
)
from cubridge.dialect.types import SharedBufferType, TileType
from cubridge.frontends.cuda.elements import Elem, Expr, FragmentLayout, _Cell, is_symbolic
from cubridge.frontends.cuda.program import text
from cubridge.frontends.cuda.values import (
    NOT_BOUND,
    ArrayValue,
    Cell,
    GlobalPointer,
    GridIndex,
    PerThread,
    Run,
    SharedPointer,
    Stride,
    StrideTerm,
    TensorArgument,
    TypeValue,
    same_value,
)

# cp.async groups a wait can reach back to (cp.async.wait_group N with N < this)
COPY_GROUP_WINDOW = 8


@dataclass(frozen=True, eq=False)
class OperandLoad:
    """Register `register` of an ldmatrix.x4 operand load: the 16x16 block at (`row`, `col`) of shared tile
    `tile` (stage `stage`). `operand`: "a" (the m16n8k16 A fragment), "b" (B stored [n][k]: rows are n) or
    "bt" (B stored [k][n], loaded transposed: rows are k)."""

    operand: str
    tile: str
    stage: object
    row: object  # int or per-thread array
    col: object
    register: int
    location: object


@dataclass(frozen=True, eq=False)
class MmaTerm:
    """One mma.sync into an accumulator sub-tile: K slice `k_slice` of A (`a`: an OperandLoad, or the four
    packed registers) times B (`b`: the OperandLoad of its first register), at m-tile `m_tile`."""

    a: object
    b: OperandLoad
    k_slice: int
    m_tile: int
    location: object


@dataclass(frozen=True, eq=False)
class GemmChain:
    """An accumulator register: its value before the first mma.sync and the terms added since."""

    init: object
    terms: tuple


class MmaSyncLifting:
    """Ampere kernels: mma.sync, ldmatrix, cp.async, pointer-carved shared memory, grid-scheduled tiles."""

    # -------------------------------------------------------------------------------------------------
    # shared tiles carved out of `extern __shared__` (profile [shared_tiles])
    def shared_tile_pointer(self, name: str, value, scope, node):
        """`T* name = <pointer into the shared block>` of a tile the profile names: its cuir.alloc. Tiles are
        carved in declaration order, each where the previous one ends."""
        spec = self.profile.section("shared_tiles")[name]
        if isinstance(value, TypeValue):  # the block's base itself
            value = SharedPointer(None)
        rows, columns = (int(self.named_constant(spec[key], scope, node)) for key in ("rows", "columns"))
        stages = int(self.named_constant(spec["stages"], scope, node)) if "stages" in spec else 1
        start = self.shared_element_offset(value, scope, node)
        carved = sum(self._stage_elements(tile) * self.shared[tile].type.stages.data for tile in self.shared_starts)
        if start != carved:
            raise self.error(scope, node, f"shared tile `{name}` starts at element {start}, not where the tiles "
                                          f"before it end ({carved})")
        buffer_type = SharedBufferType((rows, columns), self.element_type, stages=stages, swizzle=128)
        op = AllocOp(buffer_type)
        op.result.name_hint = name
        op.location = self.location(scope, node)
        self.kernel.body.block.add_op(op)
        self.shared[name] = op.result
        self.shared_starts[name] = start
        return SharedPointer(name)

    def named_constant(self, name: str, scope, node):
        """A profile's name of a compile-time value: a template argument in scope or a file constant."""
        value = self.compile_time_name(name, scope, node)
        if value is NOT_BOUND:
            raise self.error(scope, node, f"profile {self.profile.name}: `{name}` is no constant in scope here")
        return value

    def shared_element_offset(self, pointer: SharedPointer, scope, node) -> int:
        """The element offset of `pointer` from the shared block's base (a compile-time stage)."""
        if pointer.tile is None:
            return pointer.offset
        stage = pointer.stage or 0
        if not isinstance(stage, int):
            raise self.error(scope, node, f"a shared tile carved at a run-time stage of `{pointer.tile}`")
        return self.shared_starts[pointer.tile] + stage * self._stage_elements(pointer.tile) + pointer.offset

    def _stage_elements(self, tile: str) -> int:
        rows, columns = self.shared[tile].type.dims
        return rows * columns

    def shared_pointer_binary(self, operator: str, pointer: SharedPointer, step, scope, node) -> SharedPointer:
        """`pointer + step`: element offsets, and whole stages of a staged tile (`tile + stage * kTileElems`)."""
        if operator != "+":
            raise self.unsupported(scope, node, f"operator `{operator}` on a shared-memory pointer")
        if isinstance(step, int) and not isinstance(step, bool):
            if pointer.tile is None or pointer.offset or self.shared[pointer.tile].type.stages.data == 1:
                return SharedPointer(pointer.tile, pointer.stage, pointer.offset + step)
            stage_elements = self._stage_elements(pointer.tile)
            if step % stage_elements or not isinstance(pointer.stage or 0, int):
                return SharedPointer(pointer.tile, pointer.stage, pointer.offset + step)
            return SharedPointer(pointer.tile, (pointer.stage or 0) + step // stage_elements)
        if isinstance(step, Run) and pointer.tile is not None and not pointer.offset and not pointer.stage:
            product = step.value.owner
            stage_elements = self._stage_elements(pointer.tile)
            if isinstance(product, arith.MuliOp) and isinstance(product.rhs.owner, arith.ConstantOp) and \
                    product.rhs.owner.value.value.data == stage_elements:
                return SharedPointer(pointer.tile, Run(product.lhs))
        raise self.error(scope, node, f"shared-memory pointer arithmetic that is not a stage of "
                                      f"`{pointer.tile or 'the shared block'}`: `{' '.join(text(node).split())}`")

    def shared_operand(self, pointer, what: str, scope, node) -> tuple[str, SSAValue, SSAValue | None]:
        """(name, allocation, stage) of a whole shared tile stage that a primitive reads or writes."""
        if not isinstance(pointer, SharedPointer) or pointer.tile is None or pointer.offset:
            raise self.error(scope, node, f"the {what} is not a whole tile of the shared memory")
        buffer = self.shared[pointer.tile]
        if buffer.type.stages.data == 1:
            return pointer.tile, buffer, None
        return pointer.tile, buffer, self.as_index(pointer.stage if pointer.stage is not None else 0, scope, node)

    # -------------------------------------------------------------------------------------------------
    # global tensors through parameter strides
    def global_pointer_binary(self, operator: str, left, right, scope, node):
        """Pointer arithmetic on kernel tensors: `base + i * stride_d` sets coordinate d; `base + n` on a
        tensor without strides is a linear element offset."""
        if operator == "*":
            stride, count = (left, right) if isinstance(left, Stride) else (right, left)
            if not isinstance(stride, Stride) or isinstance(count, (Stride, StrideTerm)):
                raise self.unsupported(scope, node, "product of tensor strides")
            return StrideTerm(stride, count)
        if operator in ("==", "!=") and 0 in (left, right):  # a mapped tensor is present (not nullptr)
            return operator == "!="
        pointer, step = (left, right) if isinstance(left, (GlobalPointer, TensorArgument)) else (right, left)
        if operator != "+" or not isinstance(pointer, (GlobalPointer, TensorArgument)):
            raise self.unsupported(scope, node, f"operator `{operator}` on a global-memory pointer")
        if isinstance(pointer, TensorArgument):
            pointer = GlobalPointer(pointer.name)
        coordinates = dict(pointer.coordinates)
        if isinstance(step, StrideTerm):
            if step.stride.tensor != pointer.tensor or pointer.linear is not None:
                raise self.error(scope, node, f"a stride of `{step.stride.tensor}` applied to a pointer into "
                                              f"`{pointer.tensor}`")
            dim = step.stride.dim
            coordinates[dim] = self.binary("+", coordinates[dim], step.count, scope, node) \
                if dim in coordinates else step.count
            return GlobalPointer(pointer.tensor, tuple(sorted(coordinates.items())))
        if coordinates:
            raise self.error(scope, node, f"a linear offset added to a pointer into `{pointer.tensor}` that "
                                          "is addressed through its strides")
        linear = step if pointer.linear is None else self.binary("+", pointer.linear, step, scope, node)
        return GlobalPointer(pointer.tensor, (), linear)

    def tensor_tile(self, pointer, row_stride, valid_rows, what: str, scope, node) -> tuple[SSAValue, list]:
        """The tensor and tile coordinates of a row-strided global tile at `pointer` whose rows past the
        tensor's end are not accessed (`valid_rows` = rows - first row)."""
        if isinstance(pointer, TensorArgument):
            pointer = GlobalPointer(pointer.name)
        if not isinstance(pointer, GlobalPointer) or pointer.linear is not None:
            raise self.error(scope, node, f"the {what} is not a tile of a kernel tensor addressed by its strides")
        tensor = self.tensors[pointer.tensor]
        rank = tensor.type.rank.data
        row_dim = rank - 2
        if not isinstance(row_stride, Stride) or row_stride != Stride(pointer.tensor, row_dim):
            raise self.error(scope, node, f"the {what}'s row stride is not the row stride of `{pointer.tensor}`")
        coordinates = dict(pointer.coordinates)
        if any(dim >= row_dim + 1 for dim in coordinates):
            raise self.error(scope, node, f"the {what} does not start at column 0 of `{pointer.tensor}`")
        indices = [self.as_index(coordinates.get(dim, 0), scope, node) for dim in range(rank - 1)]
        indices.append(self.index_constant(0))
        self._check_valid_rows(pointer.tensor, row_dim, indices[row_dim], valid_rows, what, scope, node)
        return tensor, indices

    def _check_valid_rows(self, tensor: str, row_dim: int, first_row: SSAValue, valid_rows, what: str, scope, node):
        """`valid_rows` is a sequence length (a `cuir.dim` of a row dimension: V's is K's) less the first row."""
        def is_length(value) -> bool:
            return isinstance(value.owner, DimOp) and value.owner.dim.value.data == row_dim

        owner = valid_rows.value.owner if isinstance(valid_rows, Run) else None
        first_is_zero = isinstance(first_row.owner, arith.ConstantOp) and first_row.owner.value.value.data == 0
        if first_is_zero and isinstance(valid_rows, Run) and is_length(valid_rows.value):
            return
        if not (isinstance(owner, arith.SubiOp) and is_length(owner.lhs) and same_value(owner.rhs, first_row)):
            raise self.error(scope, node, f"the {what}'s valid rows are not the rows of `{tensor}` from the "
                                          "tile's first row on")

    # -------------------------------------------------------------------------------------------------
    # the grid: one work tile per block
    def grid_index(self, owner: str, field: str, scope, node):
        """`blockIdx` / `gridDim` in a kernel without a tile scheduler: the work tile of the block (profile
        [grid]); the first read opens the worker and its `cuir.for_each_tile`."""
        grid = self.profile.section("grid")
        if not grid:
            raise self.unsupported(scope, node, f"{owner}.{field} outside the tile scheduler")
        if self.grid_tile is None:
            self.open_grid_tile(grid, scope, node)
        if field == "x":
            return GridIndex(extent=owner == "gridDim")
        if owner == "gridDim":
            raise self.unsupported(scope, node, f"gridDim.{field}")
        tile_field = grid.get("tile", {}).get(field)
        if tile_field not in ("head", "batch"):
            raise self.error(scope, node, f"profile {self.profile.name}: blockIdx.{field} is not mapped to the "
                                          "work tile's head or batch")
        return Run(self.grid_tile.body.block.args[("q_tile", "head", "batch").index(tile_field)])

    def grid_binary(self, operator: str, left, right, scope, node):
        """`gridDim.x - 1 - blockIdx.x` is the query tile, longest first, and `blockIdx.x` alone the query tile
        in natural order; gridDim.x is read for nothing else."""
        if isinstance(left, GridIndex) and left.extent and operator == "-" and isinstance(right, int):
            return GridIndex(True, left.minus + right)
        if isinstance(left, GridIndex) and left.extent and left.minus == 1 and operator == "-" and \
                isinstance(right, GridIndex) and not right.extent:
            return self.grid_q_tile("longest_first", scope, node)
        if not any(isinstance(v, GridIndex) and v.extent for v in (left, right)):
            left, right = (self.grid_q_tile("natural", scope, node) if isinstance(v, GridIndex) else v
                           for v in (left, right))
            return self.binary(operator, left, right, scope, node)
        raise self.error(scope, node, "gridDim.x is only read as the query tile's reversal (gridDim.x - 1 - "
                                      f"blockIdx.x): `{' '.join(text(node).split())}`")

    def grid_q_tile(self, order: str, scope, node) -> Run:
        if self.grid_order not in (None, order):
            raise self.error(scope, node, f"the query tile is read in {order} order here and in "
                                          f"{self.grid_order} order elsewhere")
        self.grid_order = order
        return Run(self.grid_tile.body.block.args[0])

    def open_grid_tile(self, grid: dict, scope, node) -> None:
        if self.worker is not None or self.block is not self.kernel.body.block:
            raise self.error(scope, node, "blockIdx read inside a worker role or a run-time region: a grid "
                                          "kernel's tile starts at its top level")
        worker = WorkerOp(grid.get("worker", "worker"), (0, self.threads))
        worker.location = self.location(scope, node)
        worker.body.block.args[0].name_hint = "group"
        self.kernel.body.block.add_op(worker)
        self.block, self.worker, self.worker_constants = worker.body.block, worker, {}
        self.worker_state = {"store": Cell("store_group", None), "gemm": Cell("gemm_group", None)}
        self.copy_window = [Cell(f"copy_group_{i}", None) for i in range(COPY_GROUP_WINDOW)]
        self.materialized = {}
        tile = ForEachTileOp([], Region(Block(arg_types=[IndexType()] * 3)))
        for argument, name in zip(tile.body.block.args, ("q_tile", "head", "batch")):
            argument.name_hint = name
        self.emit(tile, scope, node)
        self.grid_tile = tile
        self.block = tile.body.block

    def close_grid_tile(self) -> None:
        """End the grid kernel's tile body; the kernel's schedule is `grid` in the order the tile was read."""
        if self.grid_tile is None:
            return
        self.grid_tile.body.block.add_op(YieldOp())
        self.kernel.properties["schedule"] = enum_attr(ScheduleAttr, "grid", "schedule")
        self.kernel.properties["order"] = enum_attr(TileOrderAttr, self.grid_order or "natural", "tile order")
        self.block, self.worker = self.kernel.body.block, None

    # -------------------------------------------------------------------------------------------------
    # cp.async tile copies and their groups
    def _prim_load_tile_async(self, callee, values, scope, node):
        name, buffer, stage = self.shared_operand(values["dest"], "cp.async destination", scope, node)
        self._check_tile_template(callee, buffer, scope, node)
        self._check_thread_index(values["thread"], scope, node)
        tensor, indices = self.tensor_tile(values["source"], values["row_stride"], values["valid_rows"],
                                           "cp.async source", scope, node)
        self.emit(CopyAsyncOp(tensor, indices, buffer, stage), scope, node)

    def _prim_store_tile_global(self, callee, values, scope, node):
        name, buffer, stage = self.shared_operand(values["source"], "tile store's source", scope, node)
        self._check_tile_template(callee, buffer, scope, node)
        self._check_thread_index(values["thread"], scope, node)
        tensor, indices = self.tensor_tile(values["dest"], values["row_stride"], values["valid_rows"],
                                           "tile store's destination", scope, node)
        self.emit(CopyOp(buffer, [stage] if stage is not None else [], tensor, indices), scope, node)

    def _check_tile_template(self, callee, buffer, scope, node):
        arguments = callee.template_arguments
        rows, columns = buffer.type.dims
        if len(arguments) < 3 or tuple(arguments[:3]) != (rows, columns, self.threads):
            raise self.error(scope, node, f"`{callee.name}<{', '.join(str(a) for a in arguments)}>` does not "
                                          f"move the {rows}x{columns} tile with the block's {self.threads} threads")

    def _check_thread_index(self, value, scope, node, modulo: int | None = None):
        ids = np.arange(self.threads)
        expected = ids % modulo if modulo else ids
        if not isinstance(value, PerThread) or not np.array_equal(value.values, expected):
            what = "lane index (threadIdx.x % 32)" if modulo else "thread index (threadIdx.x)"
            raise self.error(scope, node, f"the {what} argument is not the thread's own")

    def _prim_commit_group(self, callee, values, scope, node):
        op = CommitGroupOp(self.worker.sym_name.data)
        op.token.name_hint = "copies"
        self.emit(op, scope, node)
        for newer, older in zip(reversed(self.copy_window[:-1]), reversed(self.copy_window[1:])):
            older.value = newer.value
        self.copy_window[0].value = Run(op.token)

    def settle_registers(self, scope, node) -> None:
        """Before a wait or a barrier, the fragments and row vectors computed so far become CuIR there (as the
        kernel computes them before it synchronizes), not where they are next read as a whole."""
        for slot in self.visible_slots(scope):
            target = slot.target
            if slot.fixed or not isinstance(target, ArrayValue) or target.kind not in ("fragment", "rows") or \
                    not slot.defined() or not any(is_symbolic(cell.value) for cell in target.cells):
                continue
            slot.bind(slot.value(self, scope, node))

    def _prim_wait_group(self, callee, values, scope, node):
        pending = callee.template_arguments[0] if callee.template_arguments else None
        if not isinstance(pending, int) or not 0 <= pending < COPY_GROUP_WINDOW:
            raise self.error(scope, node, f"`wait_group` needs a constant count of pending groups below "
                                          f"{COPY_GROUP_WINDOW}")
        self.settle_registers(scope, node)
        group = self.copy_window[pending].value
        if group is None:
            committed = sum(cell.value is not None for cell in self.copy_window)
            raise self.error(scope, node, f"wait_group<{pending}> waits for no group: {committed} cp.async "
                                          "group(s) committed before it")
        self.emit(WaitGroupOp(group.value), scope, node)

    def _op_barrier(self, callee, values, scope, node):
        if self.worker is None:
            return None  # the prologue's __syncthreads: workers start after the kernel body's inits
        if tuple(self.worker.thread_range) != (0, self.threads):
            raise self.error(scope, node, "a block-wide barrier inside a worker role")
        self.settle_registers(scope, node)
        self.emit(BarrierOp(), scope, node)

    # -------------------------------------------------------------------------------------------------
    # ldmatrix operands and mma.sync
    def _load_fragment(self, operand: str, callee, values, scope, node):
        fragment = values["fragment"]
        if not isinstance(fragment, ArrayValue) or len(fragment.cells) != 4:
            raise self.error(scope, node, f"`{callee.name}` loads into something other than 4 registers")
        name, buffer, stage = self.shared_operand(values["tile"], f"`{callee.name}` source", scope, node)
        columns = buffer.type.dims[1]
        if not callee.template_arguments or callee.template_arguments[0] != columns:
            raise self.error(scope, node, f"`{callee.name}` reads `{name}` as a tile of "
                                          f"{callee.template_arguments[:1] or '?'} columns, not {columns}")
        self._check_thread_index(values["lane"], scope, node, modulo=32)
        row, col = (v.values if isinstance(v, PerThread) else v for v in (values["row"], values["col"]))
        if not isinstance(col, int) or col % 16:
            raise self.error(scope, node, f"`{callee.name}` at a column that is not a constant multiple of 16")
        location = self.location(scope, node)
        for register, cell in enumerate(fragment.cells):
            cell.value = OperandLoad(operand, name, stage, row, col, register, location)

    def _prim_load_a_fragment(self, callee, values, scope, node):
        self._load_fragment("a", callee, values, scope, node)

    def _prim_load_b_fragments(self, callee, values, scope, node):
        self._load_fragment("b", callee, values, scope, node)

    def _prim_load_b_fragments_trans(self, callee, values, scope, node):
        self._load_fragment("bt", callee, values, scope, node)

    def _prim_mma_16816(self, callee, values, scope, node):
        acc, a = values["acc"], values["a"]
        if not (isinstance(acc, ArrayValue) and acc.kind == "view" and acc.parent.kind == "fragment"
                and len(acc.cells) == 4 and acc.offset % 4 == 0 and acc.parent.layout is not None):
            raise self.error(scope, node, "the mma.sync accumulator is not a 4-register sub-tile of a float "
                                          "fragment `float x[M][N][4]`")
        layout: FragmentLayout = acc.parent.layout
        m_tile, n_tile = divmod(acc.offset // 4, layout.n_tiles)
        b = self._b_pair(values["b0"], values["b1"], scope, node)
        b_n = b.col if b.operand == "bt" else b.row
        b_k = b.row if b.operand == "bt" else b.col
        pair = b.register // 2
        if not isinstance(b_n, int) or not isinstance(b_k, int) or b_n + 8 * pair != 8 * n_tile or b_k % 16:
            raise self.error(scope, node, f"the B operand of this mma.sync is not the columns of accumulator "
                                          f"sub-tile ({m_tile}, {n_tile})")
        term_a = self._a_operand(a, layout, m_tile, b_k, scope, node)
        term = MmaTerm(term_a, b, b_k // 16, m_tile, self.location(scope, node))
        for cell in acc.cells:
            previous = cell.value
            cell.value = GemmChain(previous.init, previous.terms + (term,)) if isinstance(previous, GemmChain) \
                else GemmChain(previous, (term,))
        self.pending_gemms[id(acc.parent)] = (acc.parent, scope, node)
        if not self.unroll_depth:
            self.flush_gemms()

    def _b_pair(self, b0, b1, scope, node) -> OperandLoad:
        if not (isinstance(b0, OperandLoad) and isinstance(b1, OperandLoad) and b0.operand in ("b", "bt")
                and b0.register % 2 == 0 and b1.register == b0.register + 1 and
                (b0.tile, b0.stage, b0.col, b0.operand) == (b1.tile, b1.stage, b1.col, b1.operand)
                and _same_rows(b0.row, b1.row)):
            raise self.error(scope, node, "the B operand of this mma.sync is not one register pair of an "
                                          "ldmatrix B load")
        return b0

    def _a_operand(self, a, layout: FragmentLayout, m_tile: int, k: int, scope, node):
        if not isinstance(a, ArrayValue) or len(a.cells) != 4:
            raise self.error(scope, node, "the A operand of this mma.sync is not 4 registers")
        registers = [cell.value for cell in a.cells]
        if all(isinstance(r, Expr) and r.op == "pack" for r in registers):
            return tuple(registers)
        first = registers[0]
        if not (isinstance(first, OperandLoad) and first.operand == "a" and all(
                isinstance(r, OperandLoad) and r.register == i and r.tile == first.tile and r.stage is first.stage
                and r.col == first.col and _same_rows(r.row, first.row) for i, r in enumerate(registers))):
            raise self.error(scope, node, "the A operand of this mma.sync is neither an ldmatrix A load nor "
                                          "four packed pairs of a float fragment")
        ids = np.nonzero(self.active)[0]
        expected = layout.slot_row(ids, 2 * m_tile) - (ids % 32) // 4
        rows = first.row[ids] if isinstance(first.row, np.ndarray) else np.full(ids.size, first.row)
        if not np.array_equal(rows, expected) or first.col != k:
            raise self.error(scope, node, f"the A operand of this mma.sync is not the rows of accumulator "
                                          f"m-tile {m_tile} at the B operand's K slice")
        return first

    def flush_gemms(self) -> None:
        """Each accumulator array mma.sync wrote since the last flush: one cuir.gemm (see the module doc)."""
        pending, self.pending_gemms = self.pending_gemms, {}
        for array, scope, node in pending.values():
            self._emit_gemm(array, scope, node)

    def _emit_gemm(self, array: ArrayValue, scope, node) -> None:
        chains = [cell.value for cell in array.cells]
        if not all(isinstance(chain, GemmChain) for chain in chains):
            raise self.error(scope, node, f"mma.sync accumulates into part of `{array.name}` only")
        layout: FragmentLayout = array.layout
        terms = [term for chain in chains for term in chain.terms]
        first = terms[0]
        b_key = (first.b.tile, first.b.operand)
        if any((t.b.tile, t.b.operand) != b_key or t.b.stage is not first.b.stage for t in terms):
            raise self.error(scope, node, f"the mma.sync calls into `{array.name}` read B from more than one tile")
        register_a = isinstance(first.a, tuple)
        if any(isinstance(t.a, tuple) != register_a or (not register_a and (t.a.tile, t.a.stage) !=
                                                          (first.a.tile, first.a.stage)) for t in terms):
            raise self.error(scope, node, f"the mma.sync calls into `{array.name}` read A from more than one source")
        b_buffer = self.shared[first.b.tile]
        k_total = b_buffer.type.dims[0 if first.b.operand == "bt" else 1]
        n_total = b_buffer.type.dims[1 if first.b.operand == "bt" else 0]
        slices = list(range(k_total // 16))
        if any(sorted(t.k_slice for t in chain.terms) != slices for chain in chains):
            raise self.error(scope, node, f"the mma.sync calls into `{array.name}` do not add every K slice of "
                                          f"`{first.b.tile}` once to each register")
        if n_total != 8 * layout.n_tiles:
            raise self.error(scope, node, f"`{array.name}` has {8 * layout.n_tiles} columns but B "
                                          f"`{first.b.tile}` gives {n_total}")
        owner = self.worker.sym_name.data
        if register_a:
            a_value = self._register_a(terms, layout, k_total, scope, node)
        else:
            a_buffer = self.shared[first.a.tile]
            if a_buffer.type.dims != (layout.rows, k_total):
                raise self.error(scope, node, f"A `{first.a.tile}` is {a_buffer.type.dims[0]}x"
                                              f"{a_buffer.type.dims[1]}, not the {layout.rows}x{k_total} "
                                              f"operand of `{array.name}`")
            a_value = self._load_operand(first.a, a_buffer, owner, scope, node)
        b_value = self._load_operand(first.b, b_buffer, owner, scope, node)
        inits = [chain.init for chain in chains]
        acc = None
        if not all(isinstance(v, float) and v == 0.0 for v in inits):
            acc = self.materialize_fragment([_Cell(v) for v in inits], False, scope, node, array.name, layout)
        op = GemmOp("ab" if first.b.operand == "bt" else "abt", a_value, b_value,
                    TileType((layout.rows, 8 * layout.n_tiles), f32, owner), acc)
        self.emit(op, scope, node)
        op.location = first.location
        op.result.name_hint = array.name
        for e, cell in enumerate(array.cells):
            cell.value = Elem(op.result, e)

    def _load_operand(self, load: OperandLoad, buffer, owner: str, scope, node) -> SSAValue:
        rows, columns = buffer.type.dims
        op = LoadOp(buffer, load.stage, TileType((rows, columns), self.element_type, owner))
        self.emit(op, scope, node)
        op.location = load.location
        op.result.name_hint = f"{load.tile}_regs"
        return op.result

    def _register_a(self, terms, layout: FragmentLayout, k_total: int, scope, node) -> SSAValue:
        """A in registers: the packed pairs of a float fragment in the accumulator layout (m16n8k16's A
        registers 0..3 of K slice k are the accumulator registers of n-tiles 2k and 2k + 1): its convert."""
        a_layout = FragmentLayout(layout.m_tiles, k_total // 8)
        pairs: list = [None] * (a_layout.m_tiles * a_layout.n_tiles * 2)
        for term in terms:
            for register, packed in enumerate(term.a):
                flat = ((term.m_tile * a_layout.n_tiles) + 2 * term.k_slice + (register >> 1)) * 4 + 2 * (register & 1)
                if pairs[flat // 2] is not None and pairs[flat // 2] is not packed:
                    raise self.error(scope, node, "the A registers of the mma.sync differ between the sub-tiles "
                                                  "of one row of accumulator tiles")
                pairs[flat // 2] = packed
        if any(p is None for p in pairs):
            raise self.error(scope, node, "the A registers of the mma.sync do not cover a whole fragment")
        return self.materialize_fragment([_Cell(p) for p in pairs], True, scope, node, None, a_layout)

    # -------------------------------------------------------------------------------------------------
    # register pairs into a shared tile
    def _prim_store_pair_shared(self, callee, values, scope, node):
        """`store_pair_shared<kCols>(tile, row, col, pack)` by every thread: one cuir.store of the tile."""
        name, buffer, stage = self.shared_operand(values["tile"], "pair store's tile", scope, node)
        value = values["value"]
        if not isinstance(value, Expr) or value.op != "pack":
            raise self.error(scope, node, "a shared-memory pair store of something other than a packed pair")
        rows, columns = buffer.type.dims
        layout = FragmentLayout(rows // 64, columns // 8)
        ids = np.nonzero(self.active)[0]
        given = [values[role].values[ids] if isinstance(values[role], PerThread) else np.full(ids.size, values[role])
                 for role in ("row", "col")]
        element = next((e for e in range(0, rows * columns // self.profile.warp_group_threads, 2)
                        if np.array_equal(given[0], layout.slot_row(ids, layout.slot(e)))
                        and np.array_equal(given[1], layout.col(ids, e))), None)
        if element is None:
            raise self.error(scope, node, f"the stored pair is at no register pair's row and column of the "
                                          f"{rows}x{columns} tile `{name}` in the mma accumulator layout")
        key = (name, id(stage))
        record = self.pending_stores.setdefault(key, {"ref": SharedPointer(name), "stage": stage, "pairs": {},
                                                      "scope": scope, "node": node, "layout": layout})
        record["pairs"][element // 2] = value

    def flush_pair_stores(self, record) -> None:
        """Emit one recorded `store_pair_shared` tile (every pair of the tile must have been stored)."""
        scope, node = record["scope"], record["node"]
        name = record["ref"].tile
        buffer = self.shared[name]
        pairs = record["pairs"]
        count = buffer.type.dims[0] * buffer.type.dims[1] // (2 * self.profile.warp_group_threads)
        if sorted(pairs) != list(range(count)):
            raise self.error(scope, node, f"the pair stores into `{name}` do not cover the tile")
        packed = self.materialize_fragment([_Cell(pairs[j]) for j in range(count)], True, scope, node, None,
                                           record["layout"])
        stage = record["stage"]
        self.emit(StoreOp(packed, buffer, [stage] if stage is not None else []), scope, node)


def _same_rows(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b
