"""The primitive half of the Lifter (mixed into it): calls the profile names as primitives (`[primitives]`)
and element stores.

A primitive call becomes its CuIR op: mbarrier init, arrive, expect_tx and wait (with the arrivals each worker
instance makes), named barriers, the async-proxy fence, wgmma GEMMs, their fences and waits, TMA copies and
stores (a tile moved as panels is one op), quad row reductions and fast exp2 / tanh. Element stores of a
fragment into a swizzled shared tile, or of row values into a global tensor, are gathered over the unrolled
loops that write them into one `cuir.store`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, f32, i32
from xdsl.ir import SSAValue

from cubridge.dialect.cuir import (
    AllocOp,
    ClusterBarrierOp,
    ClusterRankOp,
    CommitGroupOp,
    CopyAsyncOp,
    FenceAsyncSharedOp,
    GemmAsyncOp,
    GemmFenceOp,
    GemmWaitOp,
    MbarrierArriveOp,
    MbarrierExpectTxOp,
    MbarrierWaitOp,
    NamedBarrierArriveOp,
    NamedBarrierSyncOp,
    StoreAsyncOp,
    StoreOp,
    WaitGroupOp,
)
from cubridge.dialect.types import MbarrierType
from cubridge.frontends.cuda.elements import (
    REDUCING,
    Affine,
    Elem,
    Expr,
    FragmentLayout,
    RowOf,
    _Cell,
    as_reduction,
    element_layout,
    free_elements,
    halves,
    is_symbolic,
    scalar_op,
)
from cubridge.frontends.cuda.program import text
from cubridge.frontends.cuda.source import CudaSource
from cubridge.frontends.cuda.values import (
    ArrayValue,
    FunctionValue,
    Run,
    Scope,
    SharedRef,
    SharedStore,
    TensorArgument,
    same_value,
)


@dataclass
class Barrier:
    """An mbarrier array of the shared storage: its stages and the CUDA arrival count of each init."""

    name: str
    stages: int
    cuda_count: int | None = None
    init_node: Node | None = None
    init_source: CudaSource | None = None
    # arrivals per worker instance of each arrive site (one per warp: 4; an issuer: 1)
    arrivals_per_instance: int | None = None
    call_sites: list = field(default_factory=list)  # of the init, for its location


class PrimitiveLifting:
    """Primitive calls and element stores (mixed into `Lifter`)."""

    # =====================================================================================================
    # primitives
    def primitive_call(self, callee: FunctionValue, primitive: tuple[str, list[str]], arguments: list[Node],
                       scope: Scope, node: Node):
        op_name, roles = primitive
        if callee.name in ("setmaxnreg_inc", "setmaxnreg_dec"):
            if self.worker is None or not callee.template_arguments:
                raise self.error(scope, node, f"`{callee.name}` outside a worker role")
            self.role_registers = int(callee.template_arguments[0])
            return None
        if callee.name in ("gemm_wait", "store_async_wait"):
            return self._wait(callee, scope, node)
        if callee.name == "gemm_wait_after":  # gemm_wait<0> (where ptxas issues it is no concern of the IR)
            return self._wait(FunctionValue("gemm_wait", (0,)), scope, node)
        if len(arguments) != len(roles):
            raise self.error(scope, node, f"`{callee.name}` takes {len(roles)} arguments in profile "
                                          f"{self.profile.name}, not {len(arguments)}")
        values = {role: self.value(argument, scope) for role, argument in zip(roles, arguments)}
        builder = getattr(self, "_prim_" + callee.name, None) or getattr(self, "_op_" + op_name.replace("cuir.", ""), None)
        if builder is None:
            raise self.error(scope, node, f"primitive `{callee.name}` ({op_name}) is not lifted yet")
        return builder(callee, values, scope, node)

    def uniform_math(self, math_op: str, values: list, scope: Scope, node: Node) -> Run:
        """A math function of values the same for every element (a slope of head h), computed where the call is."""
        operands = [value.value if isinstance(value, Run) else
                    self.emit(arith.ConstantOp(FloatAttr(float(value), f32)), scope, node).results[0]
                    for value in values]
        return self.emit_scalar(math_op, operands, scope, node)

    def emit_scalar(self, name: str, operands: list[SSAValue], scope: Scope, node: Node) -> Run:
        """Element-code operation `name` (`scalar_op`) made where the call is, on SSA operands."""
        ops = scalar_op(name, operands)
        ops = ops if isinstance(ops, list) else [ops]
        for op in ops:
            self.emit(op, scope, node)
        return Run(ops[-1].results[0])

    def table_read(self, arguments: list[Node], scope: Scope, node: Node):
        """`gather(table, index...)` of a captured table (a policy's Args field): a `cuir.gather` in the element
        code where an index depends on the element, else one where the call is (a slope of head h)."""
        table, *indices = (self.value(argument, scope) for argument in arguments)
        if not isinstance(table, TensorArgument) or table.name not in self.tensors:
            raise self.error(scope, node, f"not a captured table of the policy's Args: `{text(arguments[0])}`")
        source = self.tensors[table.name]
        integer = source.type.element_type == i32  # read as an index, as C++ computes with its `int`
        if any(is_symbolic(index) for index in indices):
            return Expr("gather_index" if integer else "gather", (Run(source), *indices), self.location(scope, node))
        coordinates = [self.as_index(index, scope, node) for index in indices]
        return self.emit_scalar("gather_index" if integer else "gather", [source, *coordinates], scope, node)

    def barrier_of(self, ref, scope: Scope, node: Node) -> tuple[SSAValue, SSAValue | None]:
        if not isinstance(ref, SharedRef) or ref.name not in self.barrier_allocs:
            raise self.error(scope, node, f"not an initialized mbarrier of the shared storage: `{text(node)}`")
        stage = None if ref.index is None else self.as_index(ref.index, scope, node)
        return self.barrier_allocs[ref.name], stage

    def _op_mbarrier_init(self, callee, values, scope: Scope, node: Node):
        ref, count = values["barrier"], values["count"]
        if self.worker is not None:
            raise self.error(scope, node, "mbarrier_init inside a worker role: inits belong to the prologue")
        if not isinstance(ref, SharedRef) or not isinstance(count, int):
            raise self.error(scope, node, "mbarrier_init of a shared-storage barrier with a constant count expected")
        index = 0 if ref.index is None else ref.index
        if not isinstance(index, int):
            raise self.error(scope, node, "mbarrier_init at a run-time stage")
        barrier = self.barriers.setdefault(ref.name, Barrier(ref.name, 0))
        barrier.stages = max(barrier.stages, index + 1)
        if barrier.stages != index + 1:
            raise self.error(scope, node, f"the stages of `{ref.name}` are initialized out of order")
        alloc = AllocOp(MbarrierType(barrier.stages))
        alloc.result.name_hint = ref.name
        alloc.location = self.location(scope, node)
        if ref.name in self.barrier_allocs:  # one more stage: the alloc grows
            old = self.barrier_allocs[ref.name].owner
            self.kernel.body.block.insert_op_before(alloc, old)
            old.result.replace_all_uses_with(alloc.result)
            old.detach()
            old.erase()
        else:
            self.kernel.body.block.add_op(alloc)
        self.barrier_allocs[ref.name] = alloc.result
        if barrier.cuda_count not in (None, count):
            raise self.error(scope, node, f"the stages of `{ref.name}` are initialized with different counts")
        barrier.cuda_count = count
        barrier.init_node, barrier.init_source = node, scope.source
        barrier.call_sites = list(self.call_sites)

    def _issuers_per_instance(self) -> int:
        width = self.profile.warp_group_threads
        ids = np.nonzero(self.active)[0]
        begin = self.worker.thread_range[0]
        if self.issue_scope == "warp":  # a warp-collective call: issued once per warp
            ids = np.unique(ids // 32) * 32
        counts = np.bincount((ids - begin) // width)
        counts = counts[counts > 0]
        return int(counts[0])

    def _op_mbarrier_arrive(self, callee, values, scope: Scope, node: Node):
        barrier, stage = self.barrier_of(values["barrier"], scope, node)
        self._count_arrivals(values["barrier"].name, scope, node)
        self.emit(MbarrierArriveOp(barrier, stage), scope, node)

    def _prim_mbarrier_arrive_cluster(self, callee, values, scope: Scope, node: Node):
        """An arrival on the barrier of cluster CTA `cta`: counted with the barrier's local arrivals (a phase of
        each CTA's barrier completes with the arrivals from every CTA)."""
        barrier, stage = self.barrier_of(values["barrier"], scope, node)
        self._count_arrivals(values["barrier"].name, scope, node)
        self.emit(MbarrierArriveOp(barrier, stage, self.as_index(values["cta"], scope, node)), scope, node)

    # -------------------------------------------------------------------------------------------------
    # thread-block clusters
    def _prim_cluster_cta_rank(self, callee, values, scope: Scope, node: Node):
        return Run(self.emit(ClusterRankOp(), scope, node).result)

    def _prim_fence_mbarrier_init_cluster(self, callee, values, scope: Scope, node: Node):
        if self.worker is not None:
            raise self.error(scope, node, "fence_mbarrier_init_cluster inside a worker role: it publishes the "
                                          "prologue's inits")
        return None  # part of a cluster kernel's initialization (cuir.kernel's lowering)

    def _op_cluster_barrier(self, callee, values, scope: Scope, node: Node):
        """Inside a role: a cuir.cluster_barrier. At kernel level before the roles: the end of the initialization,
        after which every program of the cluster runs its workers; after the roles: each role's last op."""
        if self.worker is not None:
            self.emit(ClusterBarrierOp(), scope, node)
            return None
        if self.kernel.cluster_size < 2:
            raise self.error(scope, node, "a cluster barrier in a kernel without __cluster_dims__")
        for worker in self.kernel.workers:
            op = ClusterBarrierOp()
            op.location = self.location(scope, node)
            worker.body.block.add_op(op)
        return None

    def _count_arrivals(self, name: str, scope: Scope, node: Node):
        per_instance = self._issuers_per_instance()
        record = self.barriers[name]
        if record.arrivals_per_instance not in (None, per_instance):
            raise self.error(scope, node, f"`{name}` is arrived at by {per_instance} threads of a warp group here "
                                          f"and by {record.arrivals_per_instance} elsewhere")
        record.arrivals_per_instance = per_instance

    def _op_mbarrier_expect_tx(self, callee, values, scope: Scope, node: Node):
        barrier, stage = self.barrier_of(values["barrier"], scope, node)
        if not isinstance(values["bytes"], int):
            raise self.error(scope, node, "expect_tx of a run-time byte count")
        self._count_arrivals(values["barrier"].name, scope, node)
        self.emit(MbarrierExpectTxOp(barrier, stage, values["bytes"]), scope, node)

    def _op_mbarrier_wait(self, callee, values, scope: Scope, node: Node):
        barrier, stage = self.barrier_of(values["barrier"], scope, node)
        parity = self.as_index(values["parity"], scope, node)
        self.emit(MbarrierWaitOp(barrier, stage, parity), scope, node)

    def _op_fence_async_shared(self, callee, values, scope: Scope, node: Node):
        if self.worker is None:
            return None  # the prologue's fence after the inits: part of cuir.mbarrier_init's lowering
        self.emit(FenceAsyncSharedOp(), scope, node)

    def _named_barrier(self, op_class, values, scope: Scope, node: Node):
        threads = values["threads"]
        if not isinstance(threads, int):
            raise self.error(scope, node, "a named barrier with a run-time thread count")
        if self._issuers_per_instance() != self.profile.warp_group_threads:
            raise self.error(scope, node, "a named barrier that part of a warp group takes part in")
        barrier_id = self.as_index(values["id"], scope, node)
        self.emit(op_class(barrier_id, threads), scope, node)

    def _op_named_barrier_sync(self, callee, values, scope, node):
        self._named_barrier(NamedBarrierSyncOp, values, scope, node)

    def _op_named_barrier_arrive(self, callee, values, scope, node):
        self._named_barrier(NamedBarrierArriveOp, values, scope, node)


    # -------------------------------------------------------------------------------------------------
    # tensor-core GEMMs and async groups
    def _fragment(self, value, kinds: tuple[str, ...], what: str, scope: Scope, node: Node) -> ArrayValue:
        if not isinstance(value, ArrayValue) or value.kind not in kinds:
            raise self.error(scope, node, f"the {what} of `{text(node.child_by_field_name('function'))}` is not a "
                                          "register fragment")
        return value

    def _shared_operand(self, ref, scope: Scope, node: Node):
        if not isinstance(ref, SharedRef) or ref.name not in self.shared or ref.offset != 0:
            raise self.error(scope, node, "a GEMM operand that is not a whole shared-storage tile")
        stage = None if ref.index is None else self.as_index(ref.index, scope, node)
        return self.shared[ref.name], stage

    def _issue(self, op, fragment: ArrayValue, scope: Scope, node: Node):
        self.emit(op, scope, node)
        op.result.name_hint = fragment.name
        op.token.name_hint = f"{fragment.name}_done"
        for e, cell in enumerate(fragment.cells):
            cell.value = Elem(op.result, e)
        self.gemm_issued.setdefault(id(self.block), []).append(op.token)
        self.worker_state["gemm"].value = Run(op.token)

    def _prim_gemm_async(self, callee, values, scope: Scope, node: Node):
        n, k_slices, b_mn_major = callee.template_arguments[:3]
        acc = self._fragment(values["acc"], ("fragment",), "accumulator", scope, node)
        if len(acc.cells) * 2 != n:
            raise self.error(scope, node, f"a {len(acc.cells)}-register accumulator for an N = {n} GEMM")
        lhs, lhs_stage = self._shared_operand(values["a"], scope, node)
        rhs, rhs_stage = self._shared_operand(values["b"], scope, node)
        if lhs.type.dims[1] != 16 * k_slices:
            raise self.error(scope, node, f"{k_slices} K slices of 16 over a {lhs.type.dims[1]}-column A tile")
        accumulate = values["accumulate"]
        if not isinstance(accumulate, bool):
            raise self.error(scope, node, "a GEMM whose accumulate flag is not a compile-time constant")
        acc_value = self.materialize_fragment(acc.cells, False, scope, node, acc.name) if accumulate else None
        op = GemmAsyncOp("ab" if b_mn_major else "abt", lhs, lhs_stage, rhs, rhs_stage,
                         self.fragment_type(len(acc.cells), False), acc_value)
        self._issue(op, acc, scope, node)

    def _prim_gemm_async_rs(self, callee, values, scope: Scope, node: Node):
        acc = self._fragment(values["acc"], ("fragment",), "accumulator", scope, node)
        a = self._fragment(values["a"], ("packed",), "A operand", scope, node)
        rhs, rhs_stage = self._shared_operand(values["b"], scope, node)
        if values["accumulate"] is not True:
            raise self.error(scope, node, "gemm_async_rs without accumulation is not lifted")
        acc_value = self.materialize_fragment(acc.cells, False, scope, node, acc.name)
        a_value = self.materialize_fragment(a.cells, True, scope, node, a.name)
        op = GemmAsyncOp("ab", a_value, None, rhs, rhs_stage, self.fragment_type(len(acc.cells), False), acc_value)
        self._issue(op, acc, scope, node)

    def _prim_gemm_fence_operand(self, callee, values, scope: Scope, node: Node):
        return None  # keeps registers in place around async wgmma: part of cuir.gemm_async's lowering

    def _prim_gemm_fence(self, callee, values, scope: Scope, node: Node):
        self.emit(GemmFenceOp(), scope, node)

    def _wait(self, callee, scope: Scope, node: Node):
        if not callee.template_arguments or not isinstance(callee.template_arguments[0], int):
            raise self.error(scope, node, f"`{callee.name}` without a constant count of groups left pending")
        pending = callee.template_arguments[0]
        if callee.name == "store_async_wait":
            token = self.worker_state["store"].value
            if pending != 0 or token is None:
                raise self.error(scope, node, "store_async_wait<N> with N > 0, or with no group committed")
            self.emit(WaitGroupOp(token.value), scope, node)
            return None
        issued = self.gemm_issued.setdefault(id(self.block), [])
        if not issued:  # nothing issued in this block: the group carried in (complete or not)
            tail = self.worker_state["gemm"].value
            if tail is None:
                raise self.error(scope, node, "gemm_wait with no GEMM issued")
            if pending == 0:
                self.emit(GemmWaitOp(tail.value), scope, node)
            return None
        waited = issued[:-pending] if pending else list(issued)
        for token in waited:
            self.emit(GemmWaitOp(token), scope, node)
        del issued[: len(waited)]
        return None

    def _prim_store_async_commit(self, callee, values, scope: Scope, node: Node):
        op = CommitGroupOp(self.worker.sym_name.data)
        op.token.name_hint = "stored"
        self.emit(op, scope, node)
        self.worker_state["store"].value = Run(op.token)

    def _prim_convert_pack(self, callee, values, scope: Scope, node: Node):
        return Expr("pack", (values["lo"], values["hi"]), self.location(scope, node))

    def _quad_reduction(self, kind: str, value, scope: Scope, node: Node):
        """The identity on whole-row values; a per-thread accumulation becomes the whole-row reduction."""
        if isinstance(value, Expr) and value.op in REDUCING and REDUCING[value.op] == kind and free_elements(value):
            elements = free_elements(value)
            layout = FragmentLayout.of_tile(_first_elem(value).tile.type)
            halves_seen = {layout.slot(e) for e in elements}
            if len(halves_seen) != 1:
                raise self.error(scope, node, "a quad reduction over elements of both of the thread's rows")
            reduction = as_reduction(value, halves_seen.pop())
            return Expr(reduction.op, reduction.args, self.location(scope, node))  # located at the quad reduction
        return value

    def _prim_row_reduce_max(self, callee, values, scope: Scope, node: Node):
        return self._quad_reduction("max", values["value"], scope, node)

    def _prim_row_reduce_sum(self, callee, values, scope: Scope, node: Node):
        return self._quad_reduction("sum", values["value"], scope, node)

    def _prim_fast_exp2(self, callee, values, scope: Scope, node: Node):
        if isinstance(values["x"], Run):  # the same for every element
            return self.uniform_math("exp2", [values["x"]], scope, node)
        return Expr("exp2", (values["x"],), self.location(scope, node))

    def _prim_fast_tanh(self, callee, values, scope: Scope, node: Node):
        if isinstance(values["x"], Run):
            return self.uniform_math("tanh", [values["x"]], scope, node)
        return Expr("tanh", (values["x"],), self.location(scope, node))

    # -------------------------------------------------------------------------------------------------
    # element stores: a fragment into a swizzled shared tile, row values into a global tensor
    def record_store(self, target, value, scope: Scope, node: Node):
        if isinstance(target, SharedStore):
            self._shared_element_store(target.ref, value, scope, node)
        else:
            self._tensor_element_store(target, value, scope, node)

    def _shared_element_store(self, ref: SharedRef, value, scope: Scope, node: Node):
        """One packed pair per thread at a swizzled address; the whole fragment makes one cuir.store."""
        if ref.name not in self.shared or not isinstance(value, Expr) or value.op != "pack":
            raise self.error(scope, node, "a shared-memory store that is not a packed pair of a fragment")
        elements = free_elements(value.args[0])
        if len(elements) != 1:
            raise self.error(scope, node, "a stored pair that is not one element of a fragment")
        element = elements.pop()
        buffer = self.shared[ref.name]
        rows, columns = buffer.type.dims
        ids = np.nonzero(self.active)[0]
        layout = FragmentLayout(rows // 64, columns // 8)
        row = element_layout(ids, element, "row", False, layout)
        column = element_layout(ids, element, "col", False, layout)
        panel_columns = int(self.profile.section("shared_storage").get("panel_columns", columns))
        chunk = (column % panel_columns) // 8
        expected = (column // panel_columns) * rows * panel_columns * 2 + row * 128 + ((chunk ^ (row % 8)) * 16) + \
            (column % 8) * 2
        offsets = ref.offset if isinstance(ref.offset, np.ndarray) else np.full(self.threads, ref.offset)
        if not (offsets[ids] == expected).all():
            raise self.error(scope, node, f"the stored pair is not at element {element}'s place in the 128-byte "
                                          f"swizzled layout of `{ref.name}`")
        key = (ref.name, id(ref.index))
        record = self.pending_stores.setdefault(key, {"ref": ref, "pairs": {}, "scope": scope, "node": node})
        record["pairs"][element // 2] = value

    def flush_stores(self):
        """Emit the element stores recorded so far (each must cover its whole tile)."""
        pending, self.pending_stores = self.pending_stores, {}
        for record in pending.values():
            scope, node = record["scope"], record["node"]
            if "layout" in record:
                self.flush_pair_stores(record)
            elif "pairs" in record:
                ref, pairs = record["ref"], record["pairs"]
                buffer = self.shared[ref.name]
                count = buffer.type.dims[0] * buffer.type.dims[1] // (2 * self.profile.warp_group_threads)
                if sorted(pairs) != list(range(count)):
                    raise self.error(scope, node, f"the element stores into `{ref.name}` do not cover the tile")
                packed = self.materialize_fragment([_Cell(pairs[j]) for j in range(count)], True, scope, node)
                stage = None if ref.index is None else self.as_index(ref.index, scope, node)
                self.emit(StoreOp(packed, buffer, [stage] if stage is not None else []), scope, node)
            else:
                self._emit_tensor_store(record)

    def _tensor_element_store(self, target, value, scope: Scope, node: Node):
        """`tensor[linear index] = row value` by the threads holding each row: a cuir.store of a row vector."""
        index = target.index
        if not isinstance(index, Affine):
            raise self.error(scope, node, "a global store whose index is not the thread's row")
        ids = np.nonzero(self.active)[0]
        read = halves(value)
        if len(read) != 1:
            raise self.error(scope, node, "a global store of a value that is not one row's")
        half = read.pop()
        layout = FragmentLayout(_row_tiles(value), 1)
        difference = index.threads[ids] - element_layout(ids, half, "row", True, layout)
        if not (difference == difference[0]).all():
            raise self.error(scope, node, "a global store whose index is not the thread's row")
        key = (target.tensor.name,)
        record = self.pending_stores.setdefault(key, {"tensor": target.tensor, "halves": {}, "scope": scope,
                                                       "node": node, "base": index.base,
                                                       "offset": int(difference[0])})
        record["halves"][half] = value

    def _emit_tensor_store(self, record):
        scope, node = record["scope"], record["node"]
        halves = record["halves"]
        slots = 2 * _row_tiles(halves[min(halves)])
        if sorted(halves) != list(range(slots)):
            raise self.error(scope, node, "a row store of some of the thread's rows only")
        rows = self.materialize_rows([halves[s] for s in range(slots)], scope, node, "row_" + record["tensor"].name)
        mapping = self.profile.section("parameters")["fields"]
        spec = next(m for m in mapping.values() if m.get("tensor") == record["tensor"].name)
        sizes = [mapping[name]["dim"] for name in spec["sizes"]]
        coordinates = self._delinearize(record["base"], record["offset"], sizes, scope, node)
        self.emit(StoreOp(rows, self.tensors[record["tensor"].name], coordinates), scope, node)

    def _delinearize(self, base, offset: int, sizes, scope: Scope, node: Node) -> list[SSAValue]:
        """Coordinates of a row-major linear index `((c0 * s1 + c1) * s2 + c2)`, read back from its ops."""
        value = base.value if isinstance(base, Run) else None
        coordinates = []
        for tensor, dim in reversed(sizes[1:]):
            size = self.worker_constants.get(("dim", tensor, int(dim)))
            owner = value.owner if value is not None else None
            if not isinstance(owner, arith.AddiOp) or not isinstance(owner.lhs.owner, arith.MuliOp) or \
                    owner.lhs.owner.rhs is not size:
                raise self.error(scope, node, "a global store index that is not row-major in the tensor's sizes")
            coordinates.append(owner.rhs)
            value = owner.lhs.owner.lhs
        coordinates.append(value)
        coordinates.reverse()
        if offset:
            coordinates[-1] = self.binary("+", Run(coordinates[-1]), offset, scope, node).value
        return coordinates

    def _op_store_async(self, callee, values, scope: Scope, node: Node):
        """A TMA store of one panel; consecutive panels of one tile make one cuir.store_async of the tile."""
        tensor, source = values["tensor"], values["source"]
        if not isinstance(source, SharedRef) or source.name not in self.shared:
            raise self.error(scope, node, "a TMA store from something other than a shared-storage tile")
        if not isinstance(tensor, TensorArgument):
            raise self.error(scope, node, "a TMA store to something other than a kernel tensor map")
        buffer, panel, stage, indices = self._tma_panel(source, values, "store", scope, node)
        if panel > 0:
            self._continue_panels(StoreAsyncOp, lambda op: op.source is buffer, indices, panel, source.name, "store",
                                  scope, node)
            return None
        op = StoreAsyncOp(buffer, stage, self.tensors[tensor.name], indices)
        self.emit(op, scope, node)
        self.copy_panels[op] = 1
        return None

    def _tma_panel(self, ref: SharedRef, values, transfer: str, scope: Scope, node: Node):
        """(the shared tile, the panel, the stage, the tensor indices of the tile's first column) of a TMA
        `transfer` ("load" or "store") of one panel between `ref` and the coordinates c0, c1, ... in `values`."""
        coordinates = [values[role] for role in sorted(r for r in values if r.startswith("c") and r[1:].isdigit())]
        buffer = self.shared[ref.name]
        panel = self._panel(ref, buffer, coordinates[0], transfer, scope, node)
        stage = None if ref.index is None else self.as_index(ref.index, scope, node)
        indices = [self.as_index(c, scope, node) for c in reversed(coordinates[1:])] + [self.index_constant(0)]
        return buffer, panel, stage, indices

    def _panel(self, ref: SharedRef, buffer, column, transfer: str, scope: Scope, node: Node) -> int:
        """Which panel of `buffer` a TMA `transfer` ("load" or "store") of one panel at `column` moves."""
        rows, columns = buffer.type.dims
        panel_columns = int(self.profile.section("shared_storage").get("panel_columns", columns))
        panel_bytes = rows * panel_columns * 2
        if not isinstance(ref.offset, int) or ref.offset % panel_bytes:
            raise self.error(scope, node, f"a TMA {transfer} at byte {ref.offset} of `{ref.name}`: not a panel start")
        panel = ref.offset // panel_bytes
        if column != panel * panel_columns:
            raise self.error(scope, node, f"a TMA {transfer} of panel {panel} of `{ref.name}` at a column other than "
                                          f"{panel * panel_columns}")
        return panel

    def _continue_panels(self, op_class, same_tile, indices, panel: int, name: str, transfer: str, scope: Scope,
                         node: Node):
        """Panel `panel` > 0 extends the tile transfer of the op just emitted (its panels 0..panel-1)."""
        last = self.block.last_op
        while last is not None and last.name.startswith("arith.") and last not in self.copy_panels:
            last = last.prev_op  # the recomputed coordinates of this panel
        indices_of = (lambda op: op.dest_indices) if op_class is StoreAsyncOp else (lambda op: op.source_indices)
        if not (isinstance(last, op_class) and same_tile(last) and self.copy_panels.get(last) == panel
                and len(indices_of(last)) == len(indices)
                and all(same_value(a, b) for a, b in zip(indices_of(last), indices))):
            raise self.error(scope, node, f"panel {panel} of `{name}` does not continue the {transfer} of its panel 0")
        self.copy_panels[last] = panel + 1

    def _prim_tma_load_4d_multicast(self, callee, values, scope: Scope, node: Node):
        """A TMA load of the panel at a run-time column (the CTA's rank times the panel width) into every CTA of
        the cluster: a cuir.copy_async of that panel (`columns`), `multicast`."""
        dest, source = values["dest"], values["source"]
        if not isinstance(dest, SharedRef) or dest.name not in self.shared:
            raise self.error(scope, node, "a TMA load into something other than a shared-storage tile")
        if not isinstance(source, TensorArgument):
            raise self.error(scope, node, "a TMA load from something other than a kernel tensor map")
        if values["cta_mask"] != (1 << self.kernel.cluster_size) - 1:
            raise self.error(scope, node, "a multicast to some of the cluster's CTAs only")
        buffer = self.shared[dest.name]
        rows, columns = buffer.type.dims
        panel_columns = int(self.profile.section("shared_storage").get("panel_columns", columns))
        column = values["c0"]
        if not _same_multiple(dest.offset, rows * panel_columns * 2, column, panel_columns):
            raise self.error(scope, node, f"a multicast TMA load whose byte offset in `{dest.name}` is not the "
                                          "start of its column's panel")
        stage = None if dest.index is None else self.as_index(dest.index, scope, node)
        barrier, barrier_stage = self.barrier_of(values["barrier"], scope, node)
        indices = [self.as_index(values[c], scope, node) for c in ("c3", "c2", "c1", "c0")]
        self.emit(CopyAsyncOp(self.tensors[source.name], indices, buffer, stage, barrier, barrier_stage,
                              columns=panel_columns, multicast=True), scope, node)
        return None

    def _op_copy_async(self, callee, values, scope: Scope, node: Node):
        """A TMA load of one panel; consecutive panels of one tile make one cuir.copy_async of the tile."""
        dest, source = values["dest"], values["source"]
        if not isinstance(dest, SharedRef) or dest.name not in self.shared:
            raise self.error(scope, node, "a TMA load into something other than a shared-storage tile")
        if not isinstance(source, TensorArgument):
            raise self.error(scope, node, "a TMA load from something other than a kernel tensor map")
        buffer, panel, stage, indices = self._tma_panel(dest, values, "load", scope, node)
        barrier, barrier_stage = self.barrier_of(values["barrier"], scope, node)
        if panel > 0:
            self._continue_panels(CopyAsyncOp, lambda op: op.dest is buffer and op.dest_stage is stage, indices,
                                  panel, dest.name, "load", scope, node)
            return None
        op = CopyAsyncOp(self.tensors[source.name], indices, buffer, stage, barrier, barrier_stage)
        self.emit(op, scope, node)
        self.copy_panels[op] = 1
        return None


def _same_multiple(offset, offset_unit: int, column, column_unit: int) -> bool:
    """Whether `offset` is k * offset_unit and `column` k * column_unit for one k (a run-time k: the same value
    times each constant)."""
    if isinstance(offset, int) and isinstance(column, int):
        return offset * column_unit == column * offset_unit
    factors = [_scaled(value) for value in (offset, column)]
    if None in factors:
        return False
    (base, factor), (other, other_factor) = factors
    return same_value(base, other) and (factor, other_factor) == (offset_unit, column_unit)


def _scaled(value) -> tuple[SSAValue, int] | None:
    """(x, c) of a run-time value x * c (c an arith constant)."""
    if not isinstance(value, Run) or not isinstance(value.value.owner, arith.MuliOp):
        return None
    product = value.value.owner
    for base, factor in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        if isinstance(factor.owner, arith.ConstantOp):
            return base, factor.owner.value.value.data
    return None


def _first_elem(value) -> Elem | None:
    """The first materialized fragment element `value` reads."""
    if isinstance(value, Elem):
        return value
    if isinstance(value, Expr):
        for arg in value.args:
            found = _first_elem(arg) if not isinstance(arg, tuple) else next(
                (e for e in map(_first_elem, arg) if e is not None), None)
            if found is not None:
                return found
    return None


def _row_tiles(value) -> int:
    """The 16-row tiles per warp (m_tiles) of the row vectors or fragments a row value reads."""
    if isinstance(value, RowOf):
        return value.rows.type.length.data // 64
    element = _first_elem(value)
    if element is not None:
        return element.tile.type.dims[0] // 64
    if isinstance(value, Expr):
        for arg in value.args:
            if isinstance(arg, (RowOf, Expr)):
                return _row_tiles(arg)
    return 1
