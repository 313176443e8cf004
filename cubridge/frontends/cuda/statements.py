"""The statement half of the Lifter (mixed into it): C++ statements and control flow.

Declarations bind cells in the scope; a loop over compile-time bounds unrolls; a run-time `for` becomes
`scf.for` and a run-time `if` `scf.if`, the values they carry found as `Slot`s by walking the body once over
block arguments; a branch on the thread index splits the block into worker roles (`cuir.worker`, with the
registers its `setmaxnreg` sets) or, inside a role, guards what an issuer or one lane per warp does, or splits
off one warp role per warp (profile `roles.warp_roles`); the tile scheduler's loop becomes `cuir.for_each_tile`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Block, Region, SSAValue

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect.cuir import ForEachTileOp, WorkerOp, YieldOp
from cubridge.frontends.cuda.elements import (
    Affine,
    Elem,
    Expr,
    FragmentLayout,
    RowOf,
    is_symbolic,
)
from cubridge.frontends.cuda.mma import COPY_GROUP_WINDOW, GemmChain
from cubridge.frontends.cuda.program import declarator_name, text
from cubridge.frontends.cuda.values import (
    ArrayValue,
    Cell,
    Guard,
    LambdaValue,
    ParamsValue,
    PerThread,
    Reference,
    Run,
    SchedulerValue,
    Scope,
    SharedPointer,
    SharedStorageValue,
    StructValue,
    TypeValue,
)

if TYPE_CHECKING:
    from cubridge.frontends.cuda.lift import Lifter


class _Break(Exception):
    """A C++ `break`: unwinds the walk to its loop."""


class Return(Exception):
    """A C++ `return`: unwinds the walk to the call being inlined, with the returned value."""

    def __init__(self, value=None):
        self.value = value


class Slot:
    """A variable a region may change, as one SSA value: a scalar cell, a fragment or a row pair."""

    def __init__(self, name: str, target, fixed: bool = False):
        self.name = name
        self.target = target
        self.fixed = fixed

    def _cells(self) -> list[Cell]:
        return self.target.cells if isinstance(self.target, ArrayValue) else [self.target]

    def snapshot(self):
        return tuple(cell.value for cell in self._cells())

    def restore(self, state) -> None:
        for cell, value in zip(self._cells(), state):
            cell.value = value

    def defined(self) -> bool:
        return all(cell.value is not None for cell in self._cells())

    def clear(self) -> None:
        for cell in self._cells():
            cell.value = None

    @staticmethod
    def same(a, b) -> bool:
        return len(a) == len(b) and all(x is y or (not is_symbolic(x) and not isinstance(x, Run) and x == y
                                                   and type(x) is type(y)) for x, y in zip(a, b))

    def value(self, lifter: Lifter, scope: Scope, node: Node) -> SSAValue:
        if isinstance(self.target, ArrayValue):
            if any(isinstance(cell.value, GemmChain) for cell in self.target.cells):
                raise lifter.error(scope, node, f"`{self.name}` crosses a run-time loop or branch while mma.sync "
                                                "still accumulates it (inside the unrolled loops of its GEMM)")
            if self.target.kind == "rows":
                return lifter.materialize_rows([c.value for c in self.target.cells], scope, node, self.name)
            return lifter.materialize_fragment(self.target.cells, self.target.kind == "packed", scope, node,
                                               self.name, self.target.layout)
        value = self.target.value
        if is_symbolic(value):
            raise lifter.error(scope, node, f"`{self.name}` holds a per-element value across a loop or branch")
        return lifter.carried(value, scope, node)

    def bind(self, value: SSAValue) -> None:
        if isinstance(self.target, ArrayValue):
            if self.target.kind == "rows":
                for half, cell in enumerate(self.target.cells):
                    cell.value = RowOf(value, half)
            else:
                for e, cell in enumerate(self.target.cells):
                    cell.value = Elem(value, e)
            return
        self.target.value = Run(value)


class StatementLifting:
    """C++ statements, branches, loops, worker roles and the tile loop (mixed into `Lifter`)."""

    # =====================================================================================================
    # statements
    def execute(self, node: Node, scope: Scope) -> None:
        handler = getattr(self, f"_stmt_{node.type}", None)
        if handler is None:
            raise self.unsupported(scope, node)
        handler(node, scope)

    def _stmt_compound_statement(self, node: Node, scope: Scope):
        self.execute_statements(node.named_children, Scope(scope))
        if self.pending_stores and not self.unroll_depth:
            self.flush_stores()

    def execute_statements(self, statements: list[Node], scope: Scope) -> None:
        for position, child in enumerate(statements):
            if self._is_early_return(child):
                condition = self.value(child.child_by_field_name("condition").named_children[0], scope)
                if isinstance(condition, Run):  # `if (c) return; rest` is `if (!c) { rest }`
                    rest = statements[position + 1:]
                    self.run_time_if(self._negate(condition, scope, child),
                                     lambda: self.execute_statements(rest, Scope(scope)), None, scope, child)
                    return
            self.execute(child, scope)

    def _is_early_return(self, statement: Node) -> bool:
        if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
            return False
        consequence = statement.child_by_field_name("consequence")
        if consequence.type == "compound_statement" and len(consequence.named_children) == 1:
            consequence = consequence.named_children[0]
        return consequence.type == "return_statement" and not consequence.named_children

    def _negate(self, condition: Run, scope: Scope, node: Node) -> Run:
        owner = condition.value.owner
        if isinstance(owner, arith.XOrIOp) and isinstance(owner.rhs.owner, arith.ConstantOp) and \
                isinstance(owner.rhs.type, IntegerType) and owner.rhs.owner.value.value.data in (1, -1):
            return Run(owner.lhs)  # !!c is c
        true = arith.ConstantOp(IntegerAttr(1, IntegerType(1)))
        self.emit(true, scope, node)
        return Run(self.emit(arith.XOrIOp(condition.value, true.result), scope, node).result)

    def _stmt_comment(self, node, scope):
        pass

    def _stmt_static_assert_declaration(self, node: Node, scope: Scope):
        condition = self.value(node.child_by_field_name("condition"), scope)
        if not isinstance(condition, bool):
            raise self.error(scope, node, "a static_assert whose condition is not a compile-time constant")
        if not condition:
            message = node.child_by_field_name("message")
            raise self.error(scope, node, f"static_assert fails: {text(message) if message else text(node)}")

    def _stmt_alias_declaration(self, node: Node, scope: Scope):
        name = text(node.child_by_field_name("name"))
        scope.names[name] = Cell(name, self.type_value(node.child_by_field_name("type"), scope), mutable=False)

    def _stmt_expression_statement(self, node: Node, scope: Scope):
        if self.reference_array_declaration(node, scope):
            return
        if node.named_children:
            self.evaluate(node.named_children[0], scope)

    def _stmt_return_statement(self, node: Node, scope: Scope):
        raise Return(self.value(node.named_children[0], scope) if node.named_children else None)

    def _stmt_break_statement(self, node: Node, scope: Scope):
        raise _Break()

    def _stmt_declaration(self, node: Node, scope: Scope):
        type_node = node.child_by_field_name("type")
        is_const = any(text(c) in ("const", "constexpr") for c in node.children if c.type == "type_qualifier")
        storage = [text(c) for c in node.children if c.type == "storage_class_specifier"]
        if "extern" in storage:  # extern __shared__ unsigned char shared_raw[]: the shared storage's base
            for declarator in node.children_by_field_name("declarator"):
                name = declarator_name(declarator)
                scope.names[name] = Cell(name, TypeValue("__shared_base__"), mutable=False)
            return
        declared_type = self.type_value(type_node, scope) if type_node.type != "placeholder_type_specifier" else None
        for declarator in node.children_by_field_name("declarator"):
            name = declarator_name(declarator)
            library = self.library_declaration(declared_type, declarator, scope, node)
            if library is not None:
                scope.names[name] = Cell(name, library, mutable=isinstance(library, ArrayValue))
                continue
            value = None
            storage = self.profile.section("shared_storage").get("struct")
            if isinstance(declared_type, TypeValue) and declared_type.name == storage:
                # the storage's base pointer (its alignment arithmetic included) is the allocations' concern
                value = self.make_struct(declared_type, [], scope, node)
            elif declarator.type == "init_declarator":
                value_node = declarator.child_by_field_name("value")
                inner_declarator = declarator.child_by_field_name("declarator")
                if inner_declarator.type == "reference_declarator":  # `float& score = s[e]`: the same variable
                    referenced = self.evaluate(value_node, scope)
                    target = _deref(referenced)
                    if target is None and isinstance(referenced, ArrayValue):  # a view sharing an array's cells
                        target = Cell(name, referenced, mutable=False)  # (`auto& sub = tile.tiles[0][j]`)
                    if target is None:
                        raise self.unsupported(scope, declarator, "reference to a value that is no variable")
                    scope.names[name] = target
                    continue
                if value_node.type in ("initializer_list",) and isinstance(declared_type, TypeValue) and \
                        declared_type.name in self.program.structs:
                    value = self.make_struct(declared_type, self._initializer_values(value_node, scope), scope, node)
                elif value_node.type == "initializer_list" and inner_declarator.type == "array_declarator":
                    value = self.declare_array(inner_declarator, declared_type, scope, node,
                                               self._initializer_values(value_node, scope))
                elif value_node.type == "argument_list":
                    value = self.make_struct(declared_type, [self.value(a, scope) for a in value_node.named_children],
                                             scope, node)
                else:
                    value = self.value(value_node, scope)
                    if isinstance(value, StructValue):
                        value = value.copy()
                    if name in self.profile.section("shared_tiles") and (isinstance(value, SharedPointer) or (
                            isinstance(value, TypeValue) and value.name == "__shared_base__")):
                        value = self.shared_tile_pointer(name, value, scope, node)
            elif declarator.type == "array_declarator":
                value = self.declare_array(declarator, declared_type, scope, node)
            elif isinstance(declared_type, TypeValue) and declared_type.name in self.program.structs:
                value = self.make_struct(declared_type, [], scope, node)
            if isinstance(declared_type, TypeValue) and declared_type.name == "float" and isinstance(value, int) \
                    and not isinstance(value, bool):
                value = float(value)
            scope.names[name] = Cell(name, self.named(value, name), mutable=not is_const)

    def _initializer_values(self, node: Node, scope: Scope) -> list:
        values = []
        for child in node.named_children:
            if child.type == "initializer_list":
                values.append(self._initializer_values(child, scope))
            else:
                values.append(self.value(child, scope))
        return values

    def declare_array(self, declarator: Node, declared_type, scope: Scope, node: Node, values=None):
        shape = []
        while declarator.type == "array_declarator":
            size = self.value(declarator.child_by_field_name("size"), scope)
            if not isinstance(size, int) or isinstance(size, bool):
                raise self.error(scope, declarator, "an array whose size is not a compile-time constant")
            shape.insert(0, size)
            declarator = declarator.child_by_field_name("declarator")
        return self.make_array(declarator_name(declarator), str(declared_type), tuple(shape), scope, node, values)

    def make_array(self, name: str, type_name: str, shape: tuple[int, ...], scope: Scope, node: Node, values=None):
        size = int(np.prod(shape))
        if values is not None and len(values) != size:
            raise self.error(scope, node, f"`{name}` has {size} elements but {len(values)} initializers")
        values = values if values is not None else [None] * size
        kind, layout = self.array_kind(type_name, shape)
        return ArrayValue([Cell(name, v) for v in values], kind, name, shape, layout)

    @staticmethod
    def array_kind(type_name: str, shape: tuple[int, ...]) -> tuple[str, FragmentLayout | None]:
        """What a register array holds, by its element type and shape: float [n] and [M][N][4] are fragments
        in the wgmma and mma.sync accumulator layouts, float [2] and [M][2] row vectors (elements.py); other
        float arrays hold one scalar per element."""
        size = int(np.prod(shape))
        if type_name == "float":
            if shape[-1] == 2 and len(shape) <= 2:
                return "rows", FragmentLayout(shape[0] if len(shape) == 2 else 1, 1)
            if len(shape) == 3 and shape[-1] == 4:
                return "fragment", FragmentLayout(shape[0], shape[1])
            if len(shape) == 1:
                return "fragment", FragmentLayout(1, size // 4)
            return "plain", None
        if type_name in ("uint32_t", "unsigned") and size > 2:
            return "packed", None
        return "plain", None

    def _stmt_if_statement(self, node: Node, scope: Scope):
        condition_node = node.child_by_field_name("condition")
        is_constexpr = any(c.type == "constexpr" or text(c) == "constexpr" for c in node.children[:3])
        condition = self.value(condition_node.child_by_field_name("value") or condition_node.named_children[0], scope)
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if alternative is not None and alternative.type == "else_clause":
            alternative = alternative.named_children[0]
        if isinstance(condition, (bool, int)) and not isinstance(condition, Run):
            branch = consequence if condition else alternative
            if branch is not None:
                self.execute(branch, Scope(scope))
            return
        if is_constexpr:
            raise self.error(scope, condition_node, "`if constexpr` condition is not a compile-time constant")
        if isinstance(condition, PerThread):
            self.thread_branch(condition, consequence, alternative, scope, node)
            return
        if isinstance(condition, Guard):
            self.guarded(condition, consequence, alternative, scope, node)
            return
        if isinstance(condition, Run):
            self.run_time_if(condition, consequence, alternative, scope, node)
            return
        if is_symbolic(condition):
            self.element_if(condition, consequence, alternative, scope, node)
            return
        raise self.unsupported(scope, condition_node, "condition")

    def thread_branch(self, condition: PerThread, consequence: Node, alternative: Node | None, scope: Scope,
                      node: Node):
        """A branch on a thread-dependent predicate: roles at kernel level, issuers and lanes inside a role."""
        taken = condition.values.astype(bool) & self.active
        others = ~condition.values.astype(bool) & self.active
        if self.worker is None:
            width = self.profile.warp_group_threads
            ids = np.nonzero(taken)[0]
            aligned = ids.size and ids[0] % width == 0 and (ids[-1] + 1) % width == 0 and ids.size == ids[-1] + 1 - ids[0]
            if not aligned and alternative is None:  # the prologue, run by a few threads before the roles
                saved = self.active
                self.active = taken
                try:
                    self.execute(consequence, Scope(scope))
                finally:
                    self.active = saved
                return
            self.role_split(taken, others, consequence, alternative, scope, node)
            return
        try:
            uniform = self.uniform(PerThread(condition.values.astype(np.int64)), scope, node)
        except CuBridgeError:
            uniform = None
        if uniform is not None:
            if isinstance(uniform, Run):
                flag = self.binary_run("!=", uniform, 0, scope, node)
                self.run_time_if(flag, consequence, alternative, scope, node)
                return
            branch = consequence if uniform else alternative
            if branch is not None:
                self.execute(branch, Scope(scope))
            return
        if alternative is not None:
            raise self.error(scope, node, "an `else` on a predicate that splits a warp group")
        role = self._warp_role(taken, consequence)
        if role is not None:
            self.split_warp_roles(role, taken, consequence, scope)
            return
        instances = self.instance_subset(taken)
        saved = self.active
        self.active = taken
        try:
            if instances is None:
                self.execute(consequence, Scope(scope))
            else:  # taken in some warp groups only (thread 0 of the block): an scf.if on the instance
                self.run_time_if(self.instance_condition(instances, scope, node), consequence, None, scope, node)
        finally:
            self.active = saved

    def guarded(self, guard: Guard, consequence: Node, alternative: Node | None, scope: Scope, node: Node):
        """`issuer && condition`: the issuing threads, then the run-time condition (or a row bound of a store)."""
        if alternative is not None:
            raise self.error(scope, node, "an `else` on a predicate that splits a warp group")
        saved = self.active
        self.active = guard.threads.values.astype(bool) & self.active
        try:
            if isinstance(guard.condition, Run):
                self.run_time_if(guard.condition, consequence, None, scope, node)
            elif self._is_row_bound(guard.condition):
                self.execute(consequence, Scope(scope))  # rows past the tensor's end are not stored
            else:
                raise self.unsupported(scope, node, "condition on fragment elements around a store")
        finally:
            self.active = saved

    @staticmethod
    def _is_row_bound(condition) -> bool:
        return isinstance(condition, Expr) and condition.op == "cmpi:slt" and isinstance(condition.args[0], Affine) \
            and isinstance(condition.args[1], Run)

    def element_if(self, condition, consequence: Node, alternative: Node | None, scope: Scope, node: Node):
        """A branch on an element's value: every element it assigns becomes a select."""
        cells = self._element_cells(scope)
        before = [c.value for c in cells]
        self.execute(consequence, Scope(scope))
        after_then = [c.value for c in cells]
        for c, v in zip(cells, before):
            c.value = v
        if alternative is not None:
            self.execute(alternative, Scope(scope))
        after_else = [c.value for c in cells]
        location = self.location(scope, node)
        for c, t, e in zip(cells, after_then, after_else):
            c.value = t if t is e else Expr("select", (condition, t, e), location)

    def _element_cells(self, scope: Scope) -> list[Cell]:
        cells, seen = [], set()
        current = scope
        while current is not None:
            for value in current.names.values():
                cell = _deref(value)
                if cell is None or id(cell) in seen:
                    continue
                seen.add(id(cell))
                if isinstance(cell.value, ArrayValue):
                    cells += cell.value.cells
                else:
                    cells.append(cell)
            current = current.parent
        return cells

    def role_split(self, taken, others, consequence, alternative, scope: Scope, node: Node):
        for threads, branch in ((taken, consequence), (others, alternative)):
            if branch is None or not threads.any():
                continue
            ids = np.nonzero(threads)[0]
            width = self.profile.warp_group_threads
            begin, end = int(ids[0]), int(ids[-1]) + 1
            if begin % width or end % width or len(ids) != end - begin:
                raise self.error(scope, node, "a role predicate that does not split the block at warp-group "
                                              f"boundaries ({begin}..{end})")
            self.lift_worker(begin, end, threads, branch, scope)

    def lift_worker(self, begin: int, end: int, threads, branch: Node, scope: Scope, name: str | None = None,
                    registers: int | None = None):
        roles = self.profile.section("roles")
        suffix = roles.get("function_suffix", "")
        called = re.search(r"\b(\w+)" + re.escape(suffix) + r"\b", text(branch)) if suffix else None
        named = next((role for call, role in roles.get("names", {}).items() if call in text(branch)), None)
        name = name or (called.group(1) if called else named or f"role{len(self.kernel.workers)}")
        worker = WorkerOp(name, (begin, end))
        self.kernel.body.block.add_op(worker)
        saved = (self.block, self.worker, self.worker_constants, self.active, self.role_registers, self.worker_state,
                 self.copy_window, self.materialized, self.emitted_threads)
        self.block, self.worker, self.worker_constants, self.active = worker.body.block, worker, {}, threads
        self.role_registers = registers
        self.emitted_threads = np.zeros_like(threads)
        role_scope = Scope(scope)
        self.worker_state = {"store": Cell("store_group", None), "gemm": Cell("gemm_group", None)}
        self.copy_window = [Cell(f"copy_group_{i}", None) for i in range(COPY_GROUP_WINDOW)]
        role_scope.names["__store_group__"] = self.worker_state["store"]
        role_scope.names["__gemm_group__"] = self.worker_state["gemm"]
        self.materialized = {}
        try:
            if self.profile.section("tile_scheduler").get("schedule") == "grid":
                self.grid_worker_body(branch, role_scope, scope)
            else:
                self.execute(branch, role_scope)
            if worker in self.warp_roles_of:
                self._narrow_to_its_warps(worker, scope, branch)
            if self.role_registers is not None:
                worker.properties["regs"] = IntegerAttr(self.role_registers, 64)
        finally:
            (self.block, self.worker, self.worker_constants, self.active, self.role_registers, self.worker_state,
             self.copy_window, self.materialized, emitted) = saved
            self.emitted_threads = emitted
        worker.body.block.args[0].name_hint = "instance" if worker.sym_name.data == "producer" else "group"
        worker.location = self.location(scope, branch)

    def _warp_role(self, taken, branch: Node) -> str | None:
        """The warp role (profile `roles.warp_roles`: its function, its name) a branch of whole warps calls."""
        roles = self.profile.section("roles").get("warp_roles", {})
        role = next((name for call, name in roles.items() if re.search(r"\b" + re.escape(call) + r"\b", text(branch))),
                    None)
        if role is None:
            return None
        warps = taken.reshape(-1, 32)
        if not taken.any() or (warps.any(axis=1) != warps.all(axis=1)).any():
            return None
        return role

    def split_warp_roles(self, role: str, taken, branch: Node, scope: Scope):
        """A branch of whole warps of a warp-group role calling a warp role: one worker per warp (each warp
        lifted on its own, so that what its index selects is a constant), with the warp group's register
        budget; the enclosing role keeps the warps it issues from."""
        enclosing, registers = self.worker, self.role_registers
        warps = [int(w) for w in np.unique(np.nonzero(taken)[0] // 32)]
        for index, warp in enumerate(warps):
            threads = np.zeros_like(taken)
            threads[warp * 32:(warp + 1) * 32] = True
            self.lift_worker(warp * 32, (warp + 1) * 32, threads, branch, scope, f"{role}{index}", registers)
            self.kernel.workers[-1].body.block.args[0].name_hint = "warp"
        self.warp_roles_of.setdefault(enclosing, set()).update(warps)

    def _narrow_to_its_warps(self, worker: WorkerOp, scope: Scope, node: Node):
        """A role that warp roles split from keeps the warps its own ops ran on (one contiguous run)."""
        begin, end = worker.thread_range
        used = np.unique(np.nonzero(self.emitted_threads[begin:end])[0] // 32) + begin // 32
        split = self.warp_roles_of[worker]
        if not used.size or set(used.tolist()) & split or used[-1] - used[0] + 1 != used.size:
            raise self.error(scope, node, f"role `{worker.sym_name.data}` runs on warps {used.tolist()} beside the "
                                          f"warp roles split from it (warps {sorted(split)})")
        worker.properties["thread_begin"] = IntegerAttr(int(used[0]) * 32, 64)
        worker.properties["thread_end"] = IntegerAttr(int(used[-1] + 1) * 32, 64)

    def run_time_if(self, condition: Run, consequence, alternative, scope: Scope, node: Node):
        """scf.if; the slots either branch changes are its results. A branch is a node or a callable."""
        every = self.visible_slots(scope)
        fixed_before = [slot.snapshot() for slot in every]
        slots = [slot for slot in every if not slot.fixed]
        before = [slot.snapshot() for slot in slots]
        then_block, then_after = self._branch_block(consequence, scope, slots)
        self.check_fixed(every, fixed_before, scope, node)
        for slot, state in zip(slots, before):
            slot.restore(state)
        else_block, else_after = self._branch_block(alternative, scope, slots)
        self.check_fixed(every, fixed_before, scope, node)
        changed = [i for i, slot in enumerate(slots)
                   if then_after[i] is not None and else_after[i] is not None and
                   (not slot.same(then_after[i], before[i]) or not slot.same(else_after[i], before[i]))]
        if not changed and then_block.first_op is None and else_block.first_op is None:
            for slot, state in zip(slots, before):
                slot.restore(state)
            return
        types = []
        for block, after in ((then_block, then_after), (else_block, else_after)):
            saved = self.block
            self.block = block
            try:
                yielded = []
                for i in changed:
                    slots[i].restore(after[i])
                    yielded.append(slots[i].value(self, scope, node))
            finally:
                self.block = saved
            block.add_op(scf.YieldOp(*yielded))
            types = [v.type for v in yielded]
        no_else = not types and else_block.first_op is else_block.last_op  # only its yield
        op = scf.IfOp(condition.value, types, Region(then_block), None if no_else else Region(else_block))
        self.emit(op, scope, node)
        for slot, state in zip(slots, before):
            slot.restore(state)
        for i, result in zip(changed, op.results):
            result.name_hint = slots[i].name
            slots[i].bind(result)

    def _branch_block(self, branch, scope: Scope, slots):
        block = Block()
        saved = self.block
        self.block = block
        try:
            if callable(branch):
                branch()
            elif branch is not None:
                self.execute(branch, Scope(scope))
        finally:
            self.block = saved
        return block, [slot.snapshot() for slot in slots]

    def visible_slots(self, scope: Scope) -> list[Slot]:
        """What a loop or branch may change: the mutable scalars, fragments and row vectors visible from
        `scope` (struct fields and array elements included), each as one SSA value. Other mutable variables
        (compile-time flags, the scheduler's cursor) are `Slot`s too, marked `fixed`: a region that changes
        one is an error (they have no run-time value to carry)."""
        slots, seen = [], set()

        def add(cell: Cell):
            if id(cell) in seen or not cell.mutable:
                return
            seen.add(id(cell))
            value = cell.value
            if isinstance(value, StructValue):
                for member in value.fields.values():
                    add(member)
            elif isinstance(value, ArrayValue):
                if value.kind == "view":
                    return  # its cells are its parent array's
                if value.kind in ("fragment", "packed", "rows"):
                    slots.append(Slot(cell.name, value))
                else:
                    for element in value.cells:
                        add(element)
            elif (isinstance(value, (int, float, Run)) or is_symbolic(value)) and not isinstance(value, bool):
                slots.append(Slot(cell.name, cell))
            elif value is not None and not isinstance(value, (Reference, LambdaValue, SharedStorageValue,
                                                               SchedulerValue, ParamsValue, TypeValue)):
                slots.append(Slot(cell.name, cell, fixed=True))

        for cell in self.worker_state.values():
            add(cell)
        for cell in self.copy_window:  # carried once a group is committed, whatever came before
            seen.add(id(cell))
            slots.append(Slot(cell.name, cell))
        current = scope
        while current is not None:
            for value in current.names.values():
                cell = _deref(value)
                if cell is not None:
                    add(cell)
            current = current.parent
        return slots

    def check_fixed(self, slots: list[Slot], before: list, scope: Scope, node: Node) -> None:
        """A region changed no variable that cannot be carried (see `visible_slots`)."""
        for slot, state in zip(slots, before):
            if slot.fixed and slot.snapshot() != state:
                raise self.error(scope, node, f"`{slot.name}` changes inside a run-time loop or branch, and its "
                                              f"value ({type(slot.target.value).__name__}) has no run-time form")

    def _stmt_for_statement(self, node: Node, scope: Scope):
        inner = Scope(scope)
        initializer = node.child_by_field_name("initializer")
        condition = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        body = node.child_by_field_name("body")
        if condition is None or self._is_valid_call(condition):
            self.tile_loop(node, initializer, update, body, inner, tested=condition is not None)
            return
        if initializer is None and self.run_once_loop(condition, update, body, inner, node):
            return
        if initializer is not None:
            self.execute(initializer, inner) if initializer.type == "declaration" else self.evaluate(initializer, inner)
        if initializer is not None and initializer.type == "declaration":
            variable = declarator_name(initializer.children_by_field_name("declarator")[0])
        else:
            variable = None
        start = inner.lookup(variable).value if variable else None
        probe = self._constant_condition(condition, inner)
        if probe is not None:
            self.unrolled_loop(condition, update, body, inner, node)
            return
        self.run_time_loop(variable, start, condition, update, body, inner, node)

    def run_once_loop(self, condition: Node, update: Node | None, body: Node, scope: Scope, node: Node) -> bool:
        """`for (; x == a || x == b; x += K)` with a - b a constant no multiple of K: the body runs at most
        once (a branch written as a loop), lifted as an scf.if. False when the loop is not of that form."""
        if update is None or update.type != "assignment_expression" or \
                text(update.child_by_field_name("operator")) != "+=":
            return False
        variable = text(update.child_by_field_name("left"))
        bound_nodes, stack = [], [condition]
        while stack:
            part = stack.pop()
            while part.type == "parenthesized_expression":
                part = part.named_children[0]
            operator = text(part.child_by_field_name("operator")) if part.type == "binary_expression" else None
            if operator == "||":
                stack += [part.child_by_field_name("left"), part.child_by_field_name("right")]
            elif operator == "==" and text(part.child_by_field_name("left")) == variable:
                bound_nodes.append(part.child_by_field_name("right"))
            else:
                return False
        step = self.value(update.child_by_field_name("right"), scope)
        if not isinstance(step, int) or isinstance(step, bool) or step == 0:
            return False
        bounds = [self.value(bound, scope) for bound in bound_nodes]
        differences = {_constant_difference(a, b) for a in bounds for b in bounds}
        if None in differences or any(d and d % step == 0 and d // step > 0 for d in differences):
            return False
        value = self.value(condition, scope)
        if not isinstance(value, Run):
            return False

        def once():
            self.execute(body, Scope(scope))
            self.evaluate(update, scope)

        self.run_time_if(value, once, None, scope, node)
        return True

    def _constant_condition(self, condition: Node, scope: Scope):
        """The condition's value when it is a compile-time constant (loop bounds known), else None."""
        saved_block = self.block
        probe_block = Block()
        self.block = probe_block
        try:
            value = self.value(condition, scope)
        except CuBridgeError:
            value = None
        finally:
            self.block = saved_block
        emitted = probe_block.first_op is not None
        for op in reversed(list(probe_block.ops)):  # the probe's ops must not stay users of the kernel's values
            probe_block.erase_op(op, safe_erase=False)
        if emitted:
            return None
        return value if isinstance(value, bool) else None

    def unrolled_loop(self, condition: Node, update: Node, body: Node, scope: Scope, node: Node):
        """A loop with compile-time bounds, run iteration by iteration; element stores it makes are
        emitted once it is done (one store per tile)."""
        self.unroll_depth += 1
        try:
            self._unroll(condition, update, body, scope, node)
        finally:
            self.unroll_depth -= 1
        if self.pending_gemms and not self.unroll_depth:
            self.flush_gemms()
        if self.pending_stores and not self.unroll_depth:
            self.flush_stores()

    def _unroll(self, condition: Node, update: Node, body: Node, scope: Scope, node: Node):
        for _ in range(4096):
            value = self.value(condition, scope)
            if not isinstance(value, bool):
                raise self.error(scope, condition, "loop bound became a run-time value")
            if not value:
                return
            try:
                self.execute(body, Scope(scope))
            except _Break:
                return
            if update is not None:
                self.evaluate(update, scope)
        raise self.error(scope, node, "loop runs more than 4096 iterations at compile time")

    def run_time_loop(self, variable: str | None, start, condition: Node, update: Node, body: Node, scope: Scope,
                      node: Node):
        operator = text(condition.child_by_field_name("operator")) if condition.type == "binary_expression" else None
        if operator not in ("<", "<=") or variable is None or text(condition.child_by_field_name("left")) != variable:
            raise self.unsupported(scope, condition, "loop condition (expected `i < bound` or `i <= bound`)")
        bound = self.value(condition.child_by_field_name("right"), scope)
        if operator == "<=":
            bound = self.binary("+", bound, 1, scope, node)
        bound = self.as_index(bound, scope, node)
        lower = self.as_index(start, scope, node)
        induction = scope.lookup(variable)
        slots = [slot for slot in self.visible_slots(scope) if slot.target is not induction]

        def body_of(block: Block):
            induction.value = Run(block.args[0])
            block.args[0].name_hint = variable
            self.execute(body, Scope(scope))
            if update is not None:
                self._loop_update(update, variable, scope)

        def make(inits, block):
            return scf.ForOp(lower, bound, self.index_constant(1), inits, Region(block))

        try:
            self.carried_region(slots, [IndexType()], body_of, make, scf.YieldOp, scope, node)
        except _Break:
            raise self.unsupported(scope, node, "`break` in a run-time loop")

    def carried_region(self, slots, leading_types, body_of, make, terminator, scope: Scope, node: Node):
        """Run a loop body once over block arguments for the slots; the slots it changes are carried, the
        others keep their values (their arguments are replaced by the initial values)."""
        every, fixed_before = slots, [slot.snapshot() for slot in slots]
        slots = [slot for slot in slots if not slot.fixed]
        initial = [slot.snapshot() for slot in slots]
        initial_values = [slot.value(self, scope, node) if slot.defined() else None for slot in slots]
        candidates = [i for i, v in enumerate(initial_values) if v is not None]
        block = Block(arg_types=list(leading_types) + [initial_values[i].type for i in candidates])
        lead = len(leading_types)
        for i, argument in zip(candidates, block.args[lead:]):
            argument.name_hint = slots[i].name
            slots[i].bind(argument)
        saved = self.block
        self.block = block
        try:
            body_of(block)
            self.check_fixed(every, fixed_before, scope, node)
            after = [slot.snapshot() for slot in slots]
            yielded = {}
            for i in candidates:
                yielded[i] = slots[i].value(self, scope, node) if slots[i].defined() else None
        finally:
            self.block = saved
        kept = [i for i in candidates if yielded[i] is not None and yielded[i] is not block.args[lead + candidates.index(i)]]
        for position in reversed(range(len(candidates))):
            i = candidates[position]
            if i in kept:
                continue
            argument = block.args[lead + position]
            argument.replace_all_uses_with(initial_values[i])
            block.erase_arg(argument)
        block.add_op(terminator(*[yielded[i] for i in kept]))
        op = make([initial_values[i] for i in kept], block)
        self.emit(op, scope, node)
        for slot, state in zip(slots, initial):
            slot.restore(state)
        for i, result in zip(kept, op.results):
            result.name_hint = f"{slots[i].name}_end"
            slots[i].bind(result)
        for i in range(len(slots)):  # set in the body but undefined before it: undefined after it
            if i not in candidates and not slots[i].same(after[i], initial[i]):
                slots[i].clear()
        return op

    def _loop_update(self, update: Node, variable: str, scope: Scope):
        """Apply the update to every variable but the induction variable (scf.for steps that one)."""
        parts = [update]
        while parts and parts[0].type == "comma_expression":
            first = parts.pop(0)
            parts[:0] = [first.child_by_field_name("left"), first.child_by_field_name("right")]
        for part in parts:
            target = part.child_by_field_name("argument") if part.type == "update_expression" else \
                part.child_by_field_name("left")
            if target is not None and text(target) == variable:
                if part.type != "update_expression" or text(part.child_by_field_name("operator")) != "++":
                    raise self.unsupported(scope, part, "loop step (only ++ is lifted)")
                continue
            self.evaluate(part, scope)

    # =====================================================================================================
    # the tile loop: cuir.for_each_tile
    def tile_loop(self, node: Node, initializer: Node | None, update: Node | None, body: Node, scope: Scope,
                  tested: bool = False):
        """The tile scheduler's loop: `for (;;)` whose body leaves when `valid` fails, or (`tested`) a loop whose
        condition is `scheduler.valid(cursor)`."""
        if self.worker is None:
            raise self.error(scope, node, "the tile loop outside any worker role")
        if initializer is not None:
            self.execute(initializer, scope) if initializer.type == "declaration" else self.evaluate(initializer, scope)
        statements = body.named_children if body.type == "compound_statement" else [body]
        if tested:
            statements = [None, *statements]  # the condition: a validity check before the body
        check = 0 if tested else next((i for i, s in enumerate(statements) if self._is_valid_check(s, scope)), None)
        if check is None:
            raise self.error(scope, node, "a `for (;;)` loop that is not the tile scheduler's loop (no "
                                          "`if (!scheduler.valid(...)) break;` in its body)")
        slots = self.visible_slots(scope)

        def body_of(block: Block):
            for argument, name in zip(block.args[:3], ("q_tile", "head", "batch")):
                argument.name_hint = name
            inner = Scope(scope)
            for statement in statements[:check]:
                self.execute(statement, inner)
            self._tile_decodes = block.args[:3]
            try:
                for statement in statements[check + 1:]:
                    self.execute(statement, inner)
            finally:
                self._tile_decodes = None
            if update is not None:
                self.evaluate(update, scope)

        self.carried_region(slots, [IndexType()] * 3, body_of, lambda inits, block: ForEachTileOp(inits, Region(block)),
                            YieldOp, scope, node)
        # The statements before the validity check run once more, for the index past the last tile.
        for statement in statements[:check]:
            self.execute(statement, Scope(scope))

    def _is_valid_call(self, condition: Node) -> bool:
        """Whether a loop condition is the tile scheduler's validity test."""
        valid = self.profile.section("tile_scheduler").get("valid")
        return condition.type == "call_expression" and text(condition.child_by_field_name("function")).endswith(
            f".{valid}")

    def _is_valid_check(self, statement: Node, scope: Scope) -> bool:
        if statement.type != "if_statement":
            return False
        valid = self.profile.section("tile_scheduler").get("valid")
        condition = text(statement.child_by_field_name("condition"))
        consequence = statement.child_by_field_name("consequence")
        exits = consequence.type in ("break_statement", "return_statement") or (
            consequence.type == "compound_statement" and consequence.named_children
            and consequence.named_children[0].type in ("break_statement", "return_statement"))
        return exits and f".{valid}(" in condition and condition.replace(" ", "").startswith("(!")


def _deref(value) -> Cell | None:
    """The variable a scope entry names, through references (a reference parameter names its argument)."""
    while True:
        if isinstance(value, Reference):
            value = value.cell
        elif isinstance(value, Cell) and isinstance(value.value, Reference):
            value = value.value.cell
        else:
            return value if isinstance(value, Cell) else None


def _linear(value) -> dict | None:
    """An index value as {SSA leaf or 1: coefficient} through adds, subtracts and constant products."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {1: value}
    value = value.value if isinstance(value, Run) else value
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return {1: owner.value.value.data}
    if isinstance(owner, (arith.AddiOp, arith.SubiOp, arith.MuliOp)):
        left, right = _linear(owner.lhs), _linear(owner.rhs)
        if left is None or right is None:
            return None
        if isinstance(owner, arith.MuliOp):
            if set(right) == {1}:
                return {k: c * right[1] for k, c in left.items()}
            if set(left) == {1}:
                return {k: c * left[1] for k, c in right.items()}
            return None
        sign = 1 if isinstance(owner, arith.AddiOp) else -1
        return {k: left.get(k, 0) + sign * right.get(k, 0) for k in set(left) | set(right)}
    return {value: 1}


def _constant_difference(a, b) -> int | None:
    """a - b when it is a compile-time constant (the same run-time leaves on both sides), else None."""
    left, right = _linear(a), _linear(b)
    if left is None or right is None:
        return None
    difference = {k: left.get(k, 0) - right.get(k, 0) for k in set(left) | set(right)}
    if any(c for k, c in difference.items() if k != 1):
        return None
    return difference.get(1, 0)
