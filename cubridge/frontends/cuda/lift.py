"""Lift one `__global__` instance of a CUDA kernel written with a profile's vocabulary into CuIR.

The lifter walks the kernel's syntax tree from the entry point, inlining every helper (its ops keep the
call site: `CallSiteLoc`), evaluating templates and constexpr values, and emitting CuIR for what runs:
primitive calls become their ops (`Profile.primitive`, from the op-to-primitive table), run-time
`for` / `if` become `scf.for` / `scf.if` (carried values found by running the body once over block
arguments), integer arithmetic becomes `arith`, role predicates on the thread index become `cuir.worker`s
with the budgets of their `setmaxnreg`, the shared storage's tiles and mbarriers become `cuir.alloc`s and
the tile scheduler's loop becomes `cuir.for_each_tile`. Thread-dependent values are evaluated for every
thread of the block (`PerThread`), so a branch taken by one thread of each warp group (an issuer) or by lane
0 of each warp (a per-warp arrival) is recognized from its values, not its spelling.

Whatever the walk does not understand is a `CuBridgeError` at the construct's file:line:col naming it.
"""

from __future__ import annotations

import math as pymath  # elements.py's `math` is xDSL's math dialect
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    CallSiteLoc,
    Float16Type,
    Float32Type,
    FileLineColLoc,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    FloatAttr,
    ModuleOp,
    StringAttr,
    UNKNOWN_LOC,
    f32,
    i32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect.cuir import (
    AllocOp,
    CommitGroupOp,
    GemmAsyncOp,
    GemmFenceOp,
    GemmWaitOp,
    StoreAsyncOp,
    StoreOp,
    WaitGroupOp,
    CopyAsyncOp,
    DimOp,
    ForEachTileOp,
    KernelOp,
    MbarrierArriveOp,
    MbarrierExpectTxOp,
    MbarrierWaitOp,
    NamedBarrierArriveOp,
    NamedBarrierSyncOp,
    WorkerOp,
    YieldOp,
    FenceAsyncSharedOp,
)
from cubridge.dialect.types import MbarrierType
from cubridge.frontends.cuda.elements import (Affine, Elem, Expr, FragmentLayout, FragmentLifting, RowOf, is_symbolic,
                                              scalar_op)
from cubridge.frontends.cuda.library import Allocator, BaseTiles, LibraryLifting, Omitted, SharedArray
from cubridge.frontends.cuda.mma import COPY_GROUP_WINDOW, GemmChain, MmaSyncLifting
from cubridge.frontends.cuda.profile import Profile
from cubridge.frontends.cuda.program import (
    Definition,
    EntryPoint,
    Program,
    declarator_name,
    text,
    unknown_entry,
    walk,
)
from cubridge.frontends.cuda.source import CudaSource
from cubridge.frontends.cuda.values import (
    NOT_BOUND,
    ArrayValue,
    Cell,
    Cursor,
    FunctionValue,
    GlobalPointer,
    GridIndex,
    Guard,
    LambdaValue,
    ParamsValue,
    PerThread,
    Reference,
    Run,
    SchedulerValue,
    SharedPointer,
    SharedRef,
    SharedStorageValue,
    Stride,
    StrideTerm,
    SharedStore,
    TensorStore,
    StructValue,
    TensorArgument,
    TypeValue,
)

ELEMENT_TYPES = {"__nv_bfloat16": BFloat16Type(), "__half": Float16Type(), "float": Float32Type()}
INTEGER_TYPES = {"int", "unsigned", "uint32_t", "int64_t", "uint64_t", "int32_t", "size_t", "unsigned int"}
# C++ `int` arithmetic: signed (truncating division; the lift does not track unsigned types, whose values in
# the reference kernels are small and non-negative).
_BINARY_INDEX_OPS = {
    "+": arith.AddiOp, "-": arith.SubiOp, "*": arith.MuliOp, "/": arith.DivSIOp, "%": arith.RemSIOp,
    "&": arith.AndIOp, "|": arith.OrIOp, "^": arith.XOrIOp, "<<": arith.ShLIOp, ">>": arith.ShRSIOp,
}
_COMPARISONS = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_PY_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if isinstance(a, float) or isinstance(b, float) else int(a / b),
    "%": lambda a, b: a - int(a / b) * b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "&&": lambda a, b: bool(a and b),
    "||": lambda a, b: bool(a or b),
}


class _Break(Exception):
    pass


class _Return(Exception):
    def __init__(self, value=None):
        self.value = value


class Scope:
    """Names visible at a point of the walk: variables (cells) and template arguments."""

    def __init__(self, parent: Scope | None = None, source: CudaSource | None = None, struct: str | None = None,
                 this=None):
        self.parent = parent
        self.names: dict[str, object] = {}
        self.source = source if source is not None else (parent.source if parent else None)
        self.struct = struct if struct is not None else (parent.struct if parent else None)
        self.this = this if this is not None else (parent.this if parent else None)

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        raise KeyError(name)


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


class Lifter(MmaSyncLifting, FragmentLifting, LibraryLifting):
    def __init__(self, program: Program, profile: Profile, entry: EntryPoint):
        self.program = program
        self.profile = profile
        self.entry = entry
        self.kernel: KernelOp | None = None
        self.threads = 0
        self.block: Block | None = None
        self.worker: WorkerOp | None = None
        self.worker_constants: dict = {}
        self.call_sites: list[FileLineColLoc] = []
        self.active: np.ndarray | None = None
        self.tensors: dict[str, SSAValue] = {}
        self.shared: dict[str, SSAValue] = {}
        self.barriers: dict[str, Barrier] = {}
        self.barrier_allocs: dict[str, SSAValue] = {}
        self.element_type = None
        self.profile_arguments: list[str] = []  # kernel arguments the profile's parameter fields add
        self.copy_panels: dict = {}  # a TMA copy or store op -> the panels of its tile seen so far
        self.materialized: dict = {}  # symbolic values already made CuIR (per worker)
        self.pending_stores: dict = {}  # element stores of the current unrolled loop
        self.unroll_depth = 0
        self.gemm_issued: dict = {}  # block -> tokens of GEMM groups issued in it and not yet waited
        self.worker_state: dict[str, Cell] = {}  # hidden per-worker variables: the open async groups
        self.role_registers: int | None = None
        self._tile_decodes = None  # the tile loop's (q_tile, head, batch) while its body is walked
        # Ampere kernels (mma.MmaSyncLifting)
        self.shared_starts: dict[str, int] = {}  # shared tile -> its first element in the shared block
        self.pending_gemms: dict = {}  # accumulator arrays mma.sync wrote in the current unrolled loop
        self.copy_window: list[Cell] = []  # the worker's committed cp.async groups, newest first
        self.grid_tile: ForEachTileOp | None = None  # the tile body of a grid-scheduled kernel
        self.grid_order: str | None = None
        self.expression_names: dict[int, tuple[Expr, str]] = {}  # id -> (expression, C++ variable first holding it)
        self.fallback_names: list[tuple[SSAValue, str | None]] = []  # for values no variable named at the end
        # grid-launched kernels (library.py): kernel-level statements before the role split, lifted per role
        self.kernel_prefix: list[Node] = []
        self.kernel_pass = False  # running kernel-level statements for their allocations and inits only
        self.replaying = False  # lifting the kernel-level statements again inside a role
        self.omitted_calls: list = []  # calls left out because the profile omits a value they use
        self.issue_scope = "thread"  # who issues the primitive being lifted: each thread or each warp

    # =====================================================================================================
    # errors and locations
    def error(self, scope_or_source, node: Node, message: str) -> CuBridgeError:
        source = scope_or_source.source if isinstance(scope_or_source, Scope) else scope_or_source
        return CuBridgeError(f"lift: {message}", str(source.location(node)))

    def unsupported(self, scope: Scope, node: Node, what: str | None = None) -> CuBridgeError:
        shown = " ".join(text(node).split())
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return self.error(scope, node, f"unsupported {what or node.type.replace('_', ' ')}: `{shown}`")

    def location(self, scope: Scope, node: Node):
        if scope.source is self.entry.function.source and scope.source is not self.program.main:
            node, scope = self.entry.call, Scope(None, source=self.program.main)  # inside the entry-point macro
        where = scope.source.location(node)
        loc = FileLineColLoc(StringAttr(where.filename), IntAttr(where.line), IntAttr(where.column))
        if self.call_sites:  # the innermost call site, which carries the outer ones
            loc = CallSiteLoc(loc, self.call_sites[-1])
        return loc

    def emit(self, op: Operation, scope: Scope, node: Node) -> Operation:
        if self.pending_stores and not self.unroll_depth:
            self.flush_stores()
        if self.worker is None and not self.kernel_pass and not isinstance(op, (AllocOp, arith.ConstantOp)):
            raise self.error(scope, node, f"`{op.name}` outside any worker role")
        op.location = self.location(scope, node)
        self.block.add_op(op)
        return op

    # =====================================================================================================
    # compile-time names: constants, struct members, template arguments
    def constant(self, name: str, arguments: tuple, scope: Scope, node: Node):
        if name in self.profile.definition_flags:
            return False  # the plain path's definition is lifted, not the other evaluation the constant selects
        definition = self.program.constants[name]
        inner = self.template_scope(definition, arguments, scope, node)
        value_node = definition.node.child_by_field_name("value")
        if value_node is None:
            raise self.error(scope, node, f"constant `{name}` has no value")
        return self.evaluate(value_node, inner)

    def template_scope(self, definition: Definition, arguments: tuple, scope: Scope, node: Node,
                       parent: Scope | None = None) -> Scope:
        parameters = definition.template_parameters
        if len(arguments) > len(parameters):
            raise self.error(scope, node, f"too many template arguments for `{text(node)}`")
        inner = Scope(parent, source=definition.source)
        for (kind, name), value in zip(parameters, arguments):
            inner.names[name] = Cell(name, value, mutable=False)
        return inner

    def struct_member(self, struct: str, arguments: tuple, member: str, scope: Scope, node: Node,
                      as_written: bool = False):
        """A static constexpr member or nested type of `struct<arguments>`, searched through the bases; a definition
        or kernel flag of the profile reads as false unless `as_written`."""
        definition = self.specialization(struct, arguments)
        if definition is not None:
            arguments = ()  # an explicit specialization has no template parameters left
        else:
            definition = self.program.structs.get(struct)
        if definition is None:
            raise self.error(scope, node, f"unknown struct `{struct}`")
        if not as_written and (member in self.profile.definition_flags or member in self.profile.kernel_flags):
            return False  # the member's definition is lifted, not the kernel's reassociated path it selects
        if member in definition.members:
            holder = definition.members[member]
            inner = self.template_scope(definition.definition, arguments, scope, node)
            inner.struct = struct
            inner.names["__struct_arguments__"] = arguments
            self._bind_struct_aliases(definition, inner, scope, node)
            if holder.node.type in ("alias_declaration", "type_definition"):
                return self.type_value(holder.node.child_by_field_name("type"), inner)
            value = holder.node.child_by_field_name("default_value")
            if value is None:
                raise self.error(scope, node, f"`{struct}::{member}` has no constant value")
            return self.evaluate(value, inner)
        if member in definition.methods:
            return FunctionValue(member, (), None, struct)
        for base in definition.bases:
            try:
                return self.struct_member(base, (), member, scope, node, as_written)
            except CuBridgeError:
                continue
        raise self.error(scope, node, f"`{struct}` has no member `{member}`")

    def specialization(self, struct: str, arguments: tuple):
        """The explicit specialization `template<> struct S<arguments>` of the program, if any."""
        for specialized, definition in self.program.specializations.get(struct, []):
            source_scope = Scope(None, source=definition.definition.source)
            if len(specialized) == len(arguments) and all(
                    self.value(a, source_scope) == b for a, b in zip(specialized, arguments)):
                return definition
        return None

    def _bind_struct_aliases(self, definition, inner: Scope, scope: Scope, node: Node) -> None:
        for name, holder in definition.members.items():
            if holder.node.type == "alias_declaration":
                inner.names[name] = Cell(name, self.type_value(holder.node.child_by_field_name("type"), inner),
                                         mutable=False)

    def compile_time_name(self, name: str, scope: Scope, node: Node):
        """The value `name` binds in scope (a template argument, a variable) or as a file constant; NOT_BOUND
        when neither."""
        try:
            bound = scope.lookup(name)
            return bound.value if isinstance(bound, Cell) else bound
        except KeyError:
            pass
        if name in self.program.constants:
            return self.constant(name, (), scope, node)
        return NOT_BOUND

    def struct_name(self, type_name: str) -> str | None:
        """The struct `type_name` (`Outer::Inner`) names: Outer's own, or the one it inherits from a base (a
        variant policy derives from the reference's and may keep its Args); None where there is none."""
        if type_name in self.program.structs:
            return type_name
        outer, _, inner = type_name.rpartition("::")
        struct = self.program.structs.get(outer)
        for base in struct.bases if struct is not None and inner else ():
            found = self.struct_name(f"{base}::{inner}")
            if found is not None:
                return found
        return None

    def type_value(self, node: Node, scope: Scope):
        """A type node as a TypeValue (template arguments evaluated)."""
        if node.type == "type_descriptor":
            return self.type_value(node.child_by_field_name("type"), scope)
        if node.type in ("primitive_type", "sized_type_specifier"):
            return TypeValue(" ".join(text(node).split()))
        if node.type == "type_identifier":
            name = text(node)
            value = self.compile_time_name(name, scope, node)
            if value is not NOT_BOUND:
                return value
            nested = self.struct_name(f"{scope.struct}::{name}") if scope.struct is not None else None
            return TypeValue(nested or name)  # inside a struct's method, its own nested struct (a policy's Columns)
        if node.type == "template_type":
            name = text(node.child_by_field_name("name"))
            arguments = self.template_arguments(node.child_by_field_name("arguments"), scope)
            if name in self.program.constants:  # a variable template read as a template argument
                return self.constant(name, arguments, scope, node)
            return TypeValue(name, arguments)
        if node.type in ("qualified_identifier", "dependent_type"):
            return self.evaluate(node, scope)
        raise self.unsupported(scope, node, "type")

    def template_arguments(self, node: Node, scope: Scope) -> tuple:
        arguments = []
        for argument in node.named_children:
            if argument.type == "type_descriptor":
                arguments.append(self.type_value(argument, scope))
            else:
                arguments.append(self.evaluate(argument, scope))
        return tuple(arguments)

    # =====================================================================================================
    # run-time scalars
    def index_constant(self, value: int) -> SSAValue:
        key = ("index", int(value))
        if key not in self.worker_constants:
            op = arith.ConstantOp(IntegerAttr(int(value), IndexType()))
            op.result.name_hint = f"c{value}" if value >= 0 else f"c_neg{-value}"
            self._hoist(op)
            self.worker_constants[key] = op.result
        return self.worker_constants[key]

    def _hoist(self, op: Operation) -> None:
        """Put a constant or tensor size at the top of the worker (after the ones already there)."""
        entry = self.worker.body.block if self.worker is not None else self.kernel.body.block
        hoisted = [o for o in entry.ops if isinstance(o, (arith.ConstantOp, DimOp, arith.MulfOp))]
        if hoisted:
            entry.insert_op_after(op, hoisted[-1])
        elif entry.first_op is not None:
            entry.insert_op_before(op, entry.first_op)
        else:
            entry.add_op(op)

    def as_index(self, value, scope: Scope, node: Node) -> SSAValue:
        if isinstance(value, bool):
            raise self.error(scope, node, f"a condition used as an integer: `{text(node)}`")
        if isinstance(value, int):
            return self.index_constant(value)
        if isinstance(value, Run) and isinstance(value.value.type, IndexType):
            return value.value
        if isinstance(value, PerThread):
            return self.as_index(self.uniform(value, scope, node), scope, node)
        if isinstance(value, GridIndex) and not value.extent:
            return self.grid_q_tile("natural", scope, node).value
        raise self.error(scope, node, f"not an integer value: `{' '.join(text(node).split())}`")

    def uniform(self, value: PerThread, scope: Scope, node: Node):
        """A thread-dependent value as CuIR: constant, or affine in the worker instance index."""
        active = value.values[self.active]
        if active.size and (active == active[0]).all():
            return self._py(active[0])
        if self.worker is None:
            raise self.error(scope, node, f"`{' '.join(text(node).split())}` differs between threads outside any worker role")
        begin, end = self.worker.thread_range
        ids = np.nonzero(self.active)[0]
        instance = (ids - begin) // self.profile.warp_group_threads
        per_instance = {}
        for i, v in zip(instance, active):
            if per_instance.setdefault(int(i), int(v)) != int(v):
                raise self.error(scope, node, f"`{' '.join(text(node).split())}` differs between the threads of "
                                              "one warp group; only issuer and per-warp predicates may")
        keys = sorted(per_instance)
        if len(keys) == 1:
            return per_instance[keys[0]]
        slope = per_instance[keys[1]] - per_instance[keys[0]]
        offset = per_instance[keys[0]] - slope * keys[0]
        if any(per_instance[k] != slope * k + offset for k in keys):
            raise self.error(scope, node, f"`{text(node)}` is not affine in the warp-group index")
        index = Run(self.worker.body.block.args[0])
        scaled = index if abs(slope) == 1 else self.binary_run("*", index, abs(slope), scope, node)
        if slope < 0:  # offset - |slope| * index
            return self.binary_run("-", offset, scaled, scope, node)
        return self.binary_run("+", scaled, offset, scope, node) if offset else scaled

    @staticmethod
    def _py(value):
        return bool(value) if isinstance(value, np.bool_) else int(value)

    def binary_run(self, operator: str, left, right, scope: Scope, node: Node, name: str | None = None):
        is_flag = [isinstance(v, bool) or (isinstance(v, Run) and isinstance(v.value.type, IntegerType))
                   for v in (left, right)]
        if operator in ("==", "!=") and any(is_flag):  # comparing conditions: (a < 0) == (b < 0)
            op = arith.CmpiOp(self.as_bool(left, scope, node), self.as_bool(right, scope, node),
                              _COMPARISONS[operator])
        elif operator in _COMPARISONS:
            op = arith.CmpiOp(self.as_index(left, scope, node), self.as_index(right, scope, node),
                              _COMPARISONS[operator])
        elif operator in ("&&", "||"):
            op = (arith.AndIOp if operator == "&&" else arith.OrIOp)(self.as_bool(left, scope, node),
                                                                    self.as_bool(right, scope, node))
        elif operator in _BINARY_INDEX_OPS:
            op = _BINARY_INDEX_OPS[operator](self.as_index(left, scope, node), self.as_index(right, scope, node))
        else:
            raise self.unsupported(scope, node, f"operator `{operator}` on run-time values")
        if name:
            op.results[0].name_hint = name
        self.emit(op, scope, node)
        return Run(op.results[0])

    def carried(self, value, scope: Scope, node: Node) -> SSAValue:
        """A value that crosses a loop or branch boundary, as an SSA value (constants materialized)."""
        if isinstance(value, Run):
            return value.value
        if isinstance(value, float):
            op = arith.ConstantOp(FloatAttr(value, f32))
            self.emit(op, scope, node)
            return op.result
        return self.as_index(value, scope, node)

    def as_bool(self, value, scope: Scope, node: Node) -> SSAValue:
        if isinstance(value, Run) and isinstance(value.value.type, IntegerType):
            return value.value
        if isinstance(value, bool):
            op = arith.ConstantOp(IntegerAttr(int(value), IntegerType(1)))
            self.emit(op, scope, node)
            return op.result
        raise self.error(scope, node, f"not a condition: `{text(node)}`")

    # =====================================================================================================
    # expressions
    def evaluate(self, node: Node, scope: Scope):
        handler = getattr(self, f"_expr_{node.type}", None)
        if handler is None:
            raise self.unsupported(scope, node)
        return handler(node, scope)

    def value(self, node: Node, scope: Scope):
        """An expression's value, references read through."""
        result = self.evaluate(node, scope)
        while isinstance(result, (Cell, Reference)):
            result = result.value if isinstance(result, Cell) else result.cell.value
        return result

    def _expr_number_literal(self, node: Node, scope: Scope):
        literal = text(node).lower().rstrip("ul")
        if literal.endswith("f") and not literal.startswith("0x"):
            return float(literal[:-1])
        if any(c in literal for c in ".e") and not literal.startswith("0x"):
            return float(literal)
        return int(literal, 0)

    def _expr_true(self, node, scope):
        return True

    def _expr_false(self, node, scope):
        return False

    def _expr_null(self, node, scope):
        return 0

    def _expr_nullptr(self, node, scope):
        return 0

    def _expr_parenthesized_expression(self, node: Node, scope: Scope):
        return self.evaluate(node.named_children[0], scope)

    def _expr_identifier(self, node: Node, scope: Scope):
        name = text(node)
        try:
            return scope.lookup(name)
        except KeyError:
            pass
        if name in self.program.constants:
            return self.constant(name, (), scope, node)
        if name in self.program.functions or self.profile.primitive(name) is not None:
            return FunctionValue(name)
        if name == "__shfl_sync":
            return FunctionValue(name)
        if scope.struct is not None:
            try:
                member = self.struct_member(scope.struct, scope.lookup("__struct_arguments__"), name, scope, node)
            except (CuBridgeError, KeyError):
                member = None
            if isinstance(member, FunctionValue):
                return FunctionValue(member.name, (), scope.this, member.scope_struct)
            if member is not None:
                return member
        if name == "threadIdx" or name == "blockIdx" or name == "gridDim":
            return TypeValue(name)
        library = self.library_name(node, scope)  # `using namespace kittens;`: WARPGROUP_WARPS
        if library is not None:
            return library
        raise self.error(scope, node, f"unknown name `{name}`")

    _expr_field_identifier = _expr_identifier

    def _expr_template_function(self, node: Node, scope: Scope):
        name = text(node.child_by_field_name("name"))
        arguments = self.template_arguments(node.child_by_field_name("arguments"), scope)
        if name in self.program.constants:
            return self.constant(name, arguments, scope, node)
        return FunctionValue(name, arguments)

    def _expr_qualified_identifier(self, node: Node, scope: Scope):
        library = self.library_name(node, scope)
        if library is not None:
            return library
        scope_node = node.child_by_field_name("scope")
        name_node = node.child_by_field_name("name")
        if scope_node is None:  # ::name
            return self.evaluate(name_node, scope)
        if text(scope_node) == self.profile.section("vocabulary").get("namespace"):
            return self.evaluate(name_node, scope)
        owner = self.type_value(scope_node, scope) if scope_node.type != "namespace_identifier" else None
        if owner is None:
            bound = None
            try:
                bound = scope.lookup(text(scope_node))
            except KeyError:
                pass
            owner = bound.value if isinstance(bound, Cell) else TypeValue(text(scope_node))
        if not isinstance(owner, TypeValue):
            raise self.error(scope, node, f"`{text(scope_node)}` is not a type")
        if name_node.type == "dependent_name":  # Policy::template kv_range<...>
            name_node = name_node.named_children[0]
        if name_node.type == "template_method" or name_node.type == "template_function":
            member = text(name_node.child_by_field_name("name"))
            arguments = self.template_arguments(name_node.child_by_field_name("arguments"), scope)
            value = self.struct_member(owner.name, owner.arguments, member, scope, node)
            if isinstance(value, FunctionValue):
                return FunctionValue(value.name, arguments, None, value.scope_struct)
            return value
        if name_node.type == "qualified_identifier":  # Policy::template kv_range<...>
            raise self.unsupported(scope, node, "nested qualified name")
        value = self.struct_member(owner.name, owner.arguments, text(name_node), scope, node)
        if isinstance(value, FunctionValue):
            return FunctionValue(value.name, (), None, value.scope_struct or owner.name)
        return value

    _expr_dependent_name = _expr_qualified_identifier

    def _expr_template_method(self, node: Node, scope: Scope):
        name = text(node.child_by_field_name("name"))
        arguments = self.template_arguments(node.child_by_field_name("arguments"), scope)
        return FunctionValue(name, arguments)

    def _expr_unary_expression(self, node: Node, scope: Scope):
        operator = text(node.child_by_field_name("operator"))
        operand = self.value(node.child_by_field_name("argument"), scope)
        if is_symbolic(operand):
            if operator == "-" and self._is_index_like(operand):
                return Expr("subi", (0, operand), self.location(scope, node))
            if operator == "-":
                return Expr("negf", (operand,), self.location(scope, node))
            if operator == "!":
                return Expr("cmpi:eq", (operand, False), self.location(scope, node))
        if isinstance(operand, (int, float, bool)):
            return {"-": lambda v: -v, "!": lambda v: not v, "~": lambda v: ~v, "+": lambda v: v}[operator](operand)
        if isinstance(operand, PerThread):
            return PerThread({"-": np.negative, "!": np.logical_not, "~": np.invert}[operator](operand.values))
        if operator == "!" and isinstance(operand, Run):
            return self._negate(operand, scope, node)
        if operator == "-" and isinstance(operand, Run) and operand.value.type == f32:
            return self.emit_scalar("negf", [operand.value], scope, node)
        if operator == "-" and isinstance(operand, Run):
            return self.binary_run("-", 0, operand, scope, node)
        raise self.unsupported(scope, node, f"operator `{operator}` on run-time values")

    def _expr_binary_expression(self, node: Node, scope: Scope):
        operator = text(node.child_by_field_name("operator"))
        left = self.value(node.child_by_field_name("left"), scope)
        if operator in ("&&", "||") and isinstance(left, bool):
            if (operator == "&&" and not left) or (operator == "||" and left):
                return left
            return self.value(node.child_by_field_name("right"), scope)
        right = self.value(node.child_by_field_name("right"), scope)
        return self.binary(operator, left, right, scope, node)

    def binary(self, operator: str, left, right, scope: Scope, node: Node):
        if isinstance(left, (int, float, bool)) and isinstance(right, (int, float, bool)):
            return _PY_BINARY[operator](left, right)
        if isinstance(left, TensorArgument) and operator in ("==", "!=") and right == 0:
            return operator == "!="  # a mapped tensor is present
        if isinstance(left, GemmChain) or isinstance(right, GemmChain):
            raise self.error(scope, node, "an mma.sync accumulator read before the unrolled loops that "
                                          "accumulate it end")
        if isinstance(left, GridIndex) or isinstance(right, GridIndex):
            return self.grid_binary(operator, left, right, scope, node)
        if isinstance(left, TypeValue) and left.name == "__shared_base__":
            left = SharedPointer(None)
        if isinstance(left, SharedPointer):
            return self.shared_pointer_binary(operator, left, right, scope, node)
        if any(isinstance(v, (GlobalPointer, Stride, StrideTerm)) for v in (left, right)) or (
                isinstance(left, TensorArgument) and operator == "+"):
            return self.global_pointer_binary(operator, left, right, scope, node)
        if operator == "&&" and isinstance(left, PerThread) and (is_symbolic(right) or isinstance(right, Run)):
            return Guard(left, right)
        if operator == "&&" and isinstance(left, Guard):
            return Guard(left.threads, self.binary("&&", left.condition, right, scope, node))
        if isinstance(left, SharedRef) and operator == "+" and isinstance(right, (int, PerThread)):
            offset = left.offset + (right.values if isinstance(right, PerThread) else right)
            return SharedRef(left.name, left.index, offset)
        if isinstance(left, Affine) or isinstance(right, Affine):
            return self.affine_binary(operator, left, right, scope, node)
        if is_symbolic(left) or is_symbolic(right):
            return self.symbolic_binary(operator, left, right, scope, node)
        if isinstance(left, PerThread) and isinstance(right, Run) or isinstance(left, Run) and isinstance(right, PerThread):
            if operator in ("+", "-"):
                try:
                    left = self.uniform(left, scope, node) if isinstance(left, PerThread) else left
                    right = self.uniform(right, scope, node) if isinstance(right, PerThread) else right
                except CuBridgeError:
                    return self.affine_binary(operator, left, right, scope, node)
                return self.binary(operator, left, right, scope, node)
            if operator in ("&&", "||"):
                return Guard(left, right) if isinstance(left, PerThread) else Guard(right, left)
            if operator in _COMPARISONS:
                try:
                    left = self.uniform(left, scope, node) if isinstance(left, PerThread) else left
                    right = self.uniform(right, scope, node) if isinstance(right, PerThread) else right
                except CuBridgeError:
                    as_affine = [Affine(0, v.values) if isinstance(v, PerThread) else v for v in (left, right)]
                    return self.symbolic_binary(operator, *as_affine, scope, node)
                return self.binary(operator, left, right, scope, node)
        if self._is_float_run(left) or self._is_float_run(right):
            return self.float_run(operator, left, right, scope, node)
        if isinstance(left, PerThread) or isinstance(right, PerThread):
            if isinstance(left, Run) or isinstance(right, Run):
                left = self.uniform(left, scope, node) if isinstance(left, PerThread) else left
                right = self.uniform(right, scope, node) if isinstance(right, PerThread) else right
                return self.binary(operator, left, right, scope, node)
            a = left.values if isinstance(left, PerThread) else left
            b = right.values if isinstance(right, PerThread) else right
            functions = {"/": np.floor_divide, "%": np.remainder, "&&": np.logical_and, "||": np.logical_or}
            function = functions.get(operator, _PY_BINARY.get(operator))
            return PerThread(np.asarray(function(a, b)))
        if isinstance(left, (Run, int)) and isinstance(right, (Run, int)):
            folded = self._fold(operator, left, right)
            if folded is not None:
                return folded
            return self.binary_run(operator, left, right, scope, node)
        raise self.unsupported(scope, node, f"operator `{operator}` on these operands")

    @staticmethod
    def _is_float_run(value) -> bool:
        return isinstance(value, Run) and isinstance(value.value.type, Float32Type)

    def float_run(self, operator: str, left, right, scope: Scope, node: Node):
        """Arithmetic on run-time floats outside fragments (kernel scalars)."""
        operands = [self.carried(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v,
                                 scope, node) for v in (left, right)]
        classes = {"+": arith.AddfOp, "-": arith.SubfOp, "*": arith.MulfOp, "/": arith.DivfOp}
        if operator not in classes:
            raise self.unsupported(scope, node, f"operator `{operator}` on run-time floats")
        return Run(self.emit(classes[operator](*operands), scope, node).result)

    def affine_binary(self, operator: str, left, right, scope: Scope, node: Node):
        """A run-time value plus per-thread offsets (a thread's row or column of a fragment)."""
        if operator in ("+", "-") and isinstance(left, (Run, PerThread, Affine)) and isinstance(right, (int, PerThread, Run, Affine)):
            a = left if isinstance(left, Affine) else (Affine(left, np.zeros(self.threads, dtype=np.int64))
                                                       if isinstance(left, Run) else Affine(0, left.values))
            b = right if isinstance(right, Affine) else (
                Affine(right, np.zeros(self.threads, dtype=np.int64)) if isinstance(right, Run) else
                Affine(0, right.values if isinstance(right, PerThread) else np.full(self.threads, right)))
            sign = 1 if operator == "+" else -1
            if operator == "-" and (not (isinstance(b.base, int) and b.base == 0) or b.threads.any()):
                # two positions (q_idx - kv_idx): index arithmetic inside the element function
                return self.symbolic_binary(operator, left, right, scope, node)
            base = a.base if isinstance(b.base, int) and b.base == 0 else (
                b.base if isinstance(a.base, int) and a.base == 0 else self.binary("+", a.base, b.base, scope, node))
            return Affine(base, a.threads + sign * b.threads)
        if isinstance(left, int) and operator == "+":
            return self.affine_binary("+", right, left, scope, node)
        if operator in _COMPARISONS or operator in ("&&", "||", "*", "/", "%", "-", "+"):
            return self.symbolic_binary(operator, left, right, scope, node)
        raise self.unsupported(scope, node, f"operator `{operator}` on a thread's index")

    @staticmethod
    def _fold(operator: str, left, right):
        if operator in ("+", "-", "|", "^") and right == 0 and not isinstance(right, Run):
            return left
        if operator == "+" and left == 0 and not isinstance(left, Run):
            return right
        if operator in ("*", "/") and right == 1 and not isinstance(right, Run):
            return left
        if operator == "*" and left == 1 and not isinstance(left, Run):
            return right
        return None

    def _expr_conditional_expression(self, node: Node, scope: Scope):
        condition = self.value(node.child_by_field_name("condition"), scope)
        if isinstance(condition, (bool, int)):
            branch = "consequence" if condition else "alternative"
            return self.value(node.child_by_field_name(branch), scope)
        if isinstance(condition, PerThread):
            a = self.value(node.child_by_field_name("consequence"), scope)
            b = self.value(node.child_by_field_name("alternative"), scope)
            if isinstance(a, (int, bool, PerThread)) and isinstance(b, (int, bool, PerThread)):
                av = a.values if isinstance(a, PerThread) else a
                bv = b.values if isinstance(b, PerThread) else b
                return PerThread(np.where(condition.values, av, bv))
        if is_symbolic(condition):
            a = self.value(node.child_by_field_name("consequence"), scope)
            b = self.value(node.child_by_field_name("alternative"), scope)
            return Expr("select", (condition, a, b), self.location(scope, node))
        if isinstance(condition, Run):
            a = self.value(node.child_by_field_name("consequence"), scope)
            b = self.value(node.child_by_field_name("alternative"), scope)
            op = arith.SelectOp(condition.value, self.as_index(a, scope, node), self.as_index(b, scope, node))
            return Run(self.emit(op, scope, node).result)
        raise self.unsupported(scope, node, "condition")

    def _expr_cast_expression(self, node: Node, scope: Scope):
        type_node = node.child_by_field_name("type")
        value = self.value(node.child_by_field_name("value"), scope)
        type_name = " ".join(text(type_node).split())
        if isinstance(value, (int, float, bool)):
            if type_name in INTEGER_TYPES:
                return int(value)
            if type_name == "float":
                return float(value)
        return value

    def _expr_call_expression(self, node: Node, scope: Scope):
        function_node = node.child_by_field_name("function")
        arguments_node = node.child_by_field_name("arguments")
        if function_node.type in ("template_function", "identifier", "qualified_identifier") and text(
                function_node).split("<")[0] in ("reinterpret_cast", "static_cast", "const_cast"):
            target = function_node.child_by_field_name("arguments") if function_node.type == "template_function" \
                else None
            type_name = " ".join(text(target.named_children[0]).split()) if target is not None else ""
            if text(function_node).startswith("static_cast") and type_name in ("float", "double"):
                return self.to_float(self.value(arguments_node.named_children[0], scope), scope, node)
            if text(function_node).startswith("static_cast") and type_name == "int":
                return self.to_int(self.value(arguments_node.named_children[0], scope), scope, node)
            return self.evaluate(arguments_node.named_children[0], scope)
        if function_node.type == "field_expression":
            return self.call_method(node, function_node, arguments_node, scope)
        if function_node.type in ("primitive_type", "sized_type_specifier") or text(function_node) in INTEGER_TYPES:
            return self._expr_cast_like(" ".join(text(function_node).split()), arguments_node.named_children[0], scope)
        callee = self.value(function_node, scope) if function_node.type != "identifier" else self._callee(function_node, scope)
        if isinstance(callee, TypeValue) and callee.name in self.program.structs:  # functional cast / construction
            return self.construct(callee, arguments_node.named_children, scope, node)
        if isinstance(callee, TypeValue) and callee.name in ("int", "float", "unsigned", "uint32_t", "int64_t"):
            return self._expr_cast_like(callee.name, arguments_node.named_children[0], scope)
        while isinstance(callee, Reference):  # a lambda passed to a function by reference
            callee = callee.cell.value
        if isinstance(callee, LambdaValue):
            return self.call_lambda(callee, arguments_node.named_children, scope, node)
        if not isinstance(callee, FunctionValue):
            raise self.unsupported(scope, function_node, "call")
        return self.call(callee, arguments_node.named_children, scope, node)

    def to_float(self, value, scope: Scope, node: Node):
        """An int converted to float: at compile time, in element code, or as arith casts."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if is_symbolic(value):
            return Expr("sitofp", (value,), self.location(scope, node))
        if isinstance(value, Run) and isinstance(value.value.type, IndexType):
            wide = self.emit(arith.IndexCastOp(value.value, IntegerType(64)), scope, node)
            return Run(self.emit(arith.SIToFPOp(wide.result, f32), scope, node).result)
        return value

    def to_int(self, value, scope: Scope, node: Node):
        """A float converted to int (truncated; the kernel's conversion saturates, as the executor computes
        arith.fptosi), an int as it is."""
        if isinstance(value, float):
            return int(value)
        if is_symbolic(value) and not (self._is_index_like(value) or self._is_flag_like(value)):
            return Expr("fptosi", (value,), self.location(scope, node))
        if isinstance(value, Run) and value.value.type == f32:
            return self.emit_scalar("fptosi", [value.value], scope, node)
        return value

    def _expr_cast_like(self, type_name: str, argument: Node, scope: Scope):
        value = self.value(argument, scope)
        if isinstance(value, (int, float, bool)):
            return float(value) if type_name == "float" else int(value)
        return value

    def _callee(self, node: Node, scope: Scope):
        name = text(node)
        try:
            bound = scope.lookup(name)
            return bound.value if isinstance(bound, Cell) else bound
        except KeyError:
            pass
        if name in ("min", "max", "abs", "__builtin_huge_valf", "__shfl_sync") or \
                name in self.profile.section("math") or name in self.profile.section("no_ops") or \
                name in self.profile.section("functions"):
            return FunctionValue(name)
        if name not in self.program.constants and name not in self.program.functions and \
                self.profile.primitive(name) is None and scope.struct is None:
            raise self.error(scope, node, f"unknown function `{name}`: not a primitive of profile "
                                          f"{self.profile.name} and not defined in the kernel's sources")
        return self._expr_identifier(node, scope)

    def _expr_field_expression(self, node: Node, scope: Scope):
        owner_node = node.child_by_field_name("argument")
        field = text(node.child_by_field_name("field"))
        owner = self.value(owner_node, scope)
        if isinstance(owner, TypeValue) and owner.name in ("threadIdx", "blockIdx", "gridDim"):
            return self.builtin_index(owner.name, field, scope, node)
        if isinstance(owner, StructValue):
            if field not in owner.fields:
                raise self.error(scope, node, f"`{owner.struct}` has no field `{field}`")
            return owner.fields[field]
        if isinstance(owner, ParamsValue):
            return self.parameter_field(field, scope, node)
        if isinstance(owner, (SchedulerValue, SharedStorageValue)):
            return FunctionValue(field, (), owner, owner.struct)
        if isinstance(owner, ArrayValue) and field == self.profile.section("types").get("base_tiles"):
            return BaseTiles(owner)
        raise self.unsupported(scope, node, "field access")

    def _expr_subscript_expression(self, node: Node, scope: Scope):
        array = self.value(node.child_by_field_name("argument"), scope)
        index = self.value(node.child_by_field_name("indices").named_children[0], scope)
        if isinstance(array, ArrayValue) and isinstance(index, int):
            return array.element(index)
        if isinstance(array, TensorArgument):
            return TensorStore(array, index)
        if isinstance(array, GlobalPointer) and array.linear is not None and not array.coordinates:
            return TensorStore(TensorArgument(array.tensor), self.binary("+", array.linear, index, scope, node))
        if isinstance(array, (SharedArray, Omitted)):
            return self.shared_element(array, index, scope, node)
        if isinstance(array, BaseTiles):
            return self.base_tile(array, index, scope, node)
        raise self.unsupported(scope, node, "subscript")

    def _expr_pointer_expression(self, node: Node, scope: Scope):
        operator = text(node.child_by_field_name("operator"))
        target = self.evaluate(node.child_by_field_name("argument"), scope)
        if operator == "&" and isinstance(target, Cell):
            return Reference(target)
        if operator == "&":
            return target
        if operator == "*" and isinstance(target, SharedRef):
            return SharedStore(target)
        raise self.unsupported(scope, node, "pointer dereference")

    def _expr_compound_literal_expression(self, node: Node, scope: Scope):
        type_value = self.type_value(node.child_by_field_name("type"), scope)
        return self.make_struct(type_value, self._initializer_values(node.child_by_field_name("value"), scope),
                                scope, node)

    def _expr_lambda_expression(self, node: Node, scope: Scope):
        return LambdaValue(node, scope, scope.source)

    def _expr_initializer_list(self, node: Node, scope: Scope):
        return [self.value(child, scope) if child.type != "initializer_list" else self._expr_initializer_list(child, scope)
                for child in node.named_children]

    def _expr_assignment_expression(self, node: Node, scope: Scope):
        target = self.evaluate(node.child_by_field_name("left"), scope)
        operator = text(node.child_by_field_name("operator"))
        value = self.value(node.child_by_field_name("right"), scope)
        if isinstance(target, Reference):
            target = target.cell
        if isinstance(target, (SharedStore, TensorStore)) and operator == "=":
            self.record_store(target, value, scope, node)
            return None
        if not isinstance(target, Cell):
            raise self.unsupported(scope, node, "assignment target")
        if operator != "=":
            value = self.binary(operator[:-1], target.value, value, scope, node)
        if isinstance(target.value, ArrayValue) and isinstance(value, (int, float)):
            for cell in target.value.cells:  # alpha[0] = alpha[1] = 1.f chains through one cell at a time
                cell.value = value
        target.value = self.named(value, target.name)
        return target

    def _expr_update_expression(self, node: Node, scope: Scope):
        target = self.evaluate(node.child_by_field_name("argument"), scope)
        if isinstance(target, Reference):
            target = target.cell
        operator = text(node.child_by_field_name("operator"))
        if not isinstance(target, Cell):
            raise self.unsupported(scope, node, "increment target")
        target.value = self.named(self.binary(operator[0], target.value, 1, scope, node), target.name)
        return target

    def _expr_comma_expression(self, node: Node, scope: Scope):
        self.evaluate(node.child_by_field_name("left"), scope)
        return self.evaluate(node.child_by_field_name("right"), scope)

    def _expr_sizeof_expression(self, node: Node, scope: Scope):
        operand = node.child_by_field_name("value") or node.child_by_field_name("type")
        if operand is None:
            raise self.unsupported(scope, node, "sizeof")
        value = self.type_value(operand, scope) if operand.type == "type_descriptor" else self.value(operand, scope)
        return self.library_sizeof(value, scope, node)

    def named(self, value, name: str):
        """Name the SSA value after the C++ variable that holds it (first name wins); an element or row
        expression names the tile or row vector it becomes."""
        if isinstance(value, Run) and value.value.name_hint is None and isinstance(value.value.owner, Operation):
            value.value.name_hint = name
        if isinstance(value, Expr):
            self.expression_names.setdefault(id(value), (value, name))
        return value

    # =====================================================================================================
    # thread and block indices, parameters
    def builtin_index(self, owner: str, field: str, scope: Scope, node: Node):
        """threadIdx.x, or blockIdx / gridDim: the work tile of a grid kernel with worker roles (profile
        [tile_scheduler] schedule = "grid") or of a one-worker kernel (profile [grid])."""
        if owner == "blockIdx" and self.profile.section("tile_scheduler").get("schedule") == "grid":
            return self.work_tile_index(field, scope, node)
        if field != "x" and owner == "threadIdx":
            raise self.error(scope, node, f"only the x dimension of {owner} is supported")
        if owner == "threadIdx":
            return PerThread(np.arange(self.threads))
        return self.grid_index(owner, field, scope, node)

    def parameter_field(self, field: str, scope: Scope, node: Node):
        if field in self.profile.section("omit"):
            return Omitted(field, self.profile.section("omit")[field])
        mapping = self.profile.section("parameters").get("fields", {}).get(field)
        if mapping is None:
            raise self.error(scope, node, f"parameter field `{field}` has no mapping in profile {self.profile.name}")
        if "value" in mapping:
            return mapping["value"]
        if "dim" in mapping:
            tensor, dim = mapping["dim"]
            return self.parameter_size(tensor, int(dim), scope, node, field)
        if "tensor" in mapping:
            return TensorArgument(mapping["tensor"])
        if "stride" in mapping:
            tensor, dim = mapping["stride"]
            return Stride(tensor, int(dim))
        if "quotient" in mapping:  # a ratio of two tensor sizes: { quotient = [["q", 1], ["k", 1]] }
            sizes = [self.parameter_size(tensor, int(dim), scope, node) for tensor, dim in mapping["quotient"]]
            return self.named(self.binary("/", sizes[0], sizes[1], scope, node), field)
        if "scalar" in mapping:
            value = Run(self.kernel.argument(mapping["scalar"]))
            if "multiply" not in mapping:
                return value
            key = ("scalar", field)
            if key not in self.worker_constants:
                saved = self.block
                self.block = self.worker.body.block if self.worker is not None else self.kernel.body.block
                constant = arith.ConstantOp(FloatAttr(float(mapping["multiply"]), f32))
                product = arith.MulfOp(value.value, constant.result)
                product.result.name_hint = field
                for op in (constant, product):
                    op.location = self.location(scope, node)
                    self._hoist(op)
                self.block = saved
                self.worker_constants[key] = product.result
            return Run(self.worker_constants[key])
        raise self.error(scope, node, f"profile {self.profile.name}: mapping of `{field}` not understood")

    def parameter_size(self, tensor: str, dim: int, scope: Scope, node: Node, name: str | None = None) -> Run:
        """`cuir.dim %tensor[dim]`, made once per worker at its top."""
        key = ("dim", tensor, dim)
        if key not in self.worker_constants:
            op = DimOp(self.tensors[tensor], dim)
            op.result.name_hint = name
            op.location = self.location(scope, node)
            self._hoist(op)
            self.worker_constants[key] = op.result
        return Run(self.worker_constants[key])

    # =====================================================================================================
    # calls
    def call_method(self, node: Node, function_node: Node, arguments_node: Node, scope: Scope):
        owner_node = function_node.child_by_field_name("argument")
        method_node = function_node.child_by_field_name("field")
        owner_ref = self.evaluate(owner_node, scope)
        owner = owner_ref.value if isinstance(owner_ref, Cell) else owner_ref
        if isinstance(owner, Reference):
            owner = owner.cell.value
        method = text(method_node)
        arguments = arguments_node.named_children
        if isinstance(owner, SharedStorageValue):
            return self.shared_ref(method, arguments, scope, node)
        if isinstance(owner, SchedulerValue):
            return self.scheduler_call(method, arguments, scope, node)
        if isinstance(owner, StructValue):
            return self.call(FunctionValue(method, (), owner, owner.struct), arguments, scope, node)
        if isinstance(owner, Allocator):
            template = method_node.child_by_field_name("arguments") if method_node.type == "template_method" else None
            name = text(method_node.child_by_field_name("name")) if template is not None else method
            return self.allocate(name, self.template_arguments(template, scope) if template else (), scope, node)
        raise self.unsupported(scope, node, "method call")

    def call(self, callee: FunctionValue, arguments: list[Node], scope: Scope, node: Node):
        entry = self.profile.entry(callee.name) if callee.scope_struct is None else None
        if entry is not None:
            return self.library_call(callee, entry, arguments, scope, node)
        if callee.scope_struct is None and callee.name in self.profile.section("functions"):
            return self.library_function(callee.name, scope, node)
        if callee.scope_struct is None and callee.name in self.profile.section("no_ops"):
            return None  # no meaning at tile level (the profile says why)
        primitive = self.profile.primitive(callee.name) if callee.scope_struct is None else None
        if primitive is not None:
            return self.primitive_call(callee, primitive, arguments, scope, node)
        if callee.scope_struct is None and callee.name == self.profile.section("parameters").get("table_read"):
            return self.table_read(arguments, scope, node)
        if callee.name == "__builtin_huge_valf" and callee.scope_struct is None:
            return float("inf")
        if callee.name == "__shfl_sync" and callee.scope_struct is None:
            # a broadcast of the issuing lane's value: the instance-level program has one value already
            if len(arguments) != 3 or self.value(arguments[2], scope) != 0:
                raise self.error(scope, node, "only __shfl_sync(mask, value, 0) (a broadcast from lane 0) is lifted")
            return self.value(arguments[1], scope)
        math_op = self.profile.section("math").get(callee.name) if callee.scope_struct is None else None
        if math_op is not None:
            values = [self.value(a, scope) for a in arguments]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                return float(_FOLDED_MATH[math_op](*values))
            if any(is_symbolic(value) for value in values):
                return Expr(math_op, tuple(values), self.location(scope, node))
            return self.uniform_math(math_op, values, scope, node)
        if callee.name == "abs" and callee.scope_struct is None:  # of an int: math.absi on the index
            value = self.value(arguments[0], scope)
            if isinstance(value, int) and not isinstance(value, bool):
                return abs(value)
            if is_symbolic(value):
                return Expr("absi", (value,), self.location(scope, node))
            return self.emit_scalar("absi", [self.as_index(value, scope, node)], scope, node)
        if callee.name in ("min", "max") and callee.scope_struct is None:
            values = [self.value(a, scope) for a in arguments]
            if all(isinstance(v, (int, float)) for v in values):
                return (min if callee.name == "min" else max)(values)
            if any(is_symbolic(v) for v in values):  # of ints, in element code (a T5 bucket's cap)
                return Expr(callee.name + "si", tuple(values), self.location(scope, node))
            return self.emit_scalar(callee.name + "si", [self.as_index(v, scope, node) for v in values], scope, node)
        definition = self.resolve(callee, len(arguments), scope, node)
        return self.inline(definition, callee, arguments, scope, node)

    def resolve(self, callee: FunctionValue, count: int, scope: Scope, node: Node) -> Definition:
        """The definition a call of `callee` with `count` arguments runs: of its overloads, the first that takes
        that many (a policy's keep() with and without the key's columns)."""
        if callee.scope_struct is not None:
            struct = self.program.structs.get(callee.scope_struct)
            while struct is not None and callee.name not in struct.methods:
                struct = self.program.structs.get(struct.bases[0]) if struct.bases else None
            if struct is None:
                raise self.error(scope, node, f"`{callee.scope_struct}` has no method `{callee.name}`")
            definitions = struct.methods[callee.name]
        else:
            definitions = self.program.functions.get(callee.name)
        if not definitions:
            raise self.error(scope, node, f"unknown function `{callee.name}`: not a primitive of profile "
                                          f"{self.profile.name} and not defined in the kernel's sources")
        fitting = [d for d in definitions if _takes(d, count)]
        if not fitting:
            raise self.error(scope, node, f"no overload of `{callee.name}` takes {count} arguments")
        return fitting[0]

    def inline(self, definition: Definition, callee: FunctionValue, arguments: list[Node], scope: Scope, node: Node):
        if definition.source is not self.program.main and any(
                n.type == "gnu_asm_expression" for n in walk(definition.node.child_by_field_name("body"))):
            raise self.error(scope, node, f"unknown primitive `{callee.name}`: it issues inline PTX and profile "
                                          f"{self.profile.name} does not map it")
        inner = Scope(None, source=definition.source)
        template = list(callee.template_arguments)
        parameters = definition.template_parameters
        struct_arguments = ()
        if callee.this is not None and isinstance(callee.this, StructValue):
            struct_arguments = callee.this.arguments
        if callee.scope_struct is not None:
            struct_definition = self.program.structs[callee.scope_struct]
            for (kind, name), value in zip(struct_definition.definition.template_parameters, struct_arguments):
                inner.names[name] = Cell(name, value, mutable=False)
            inner.struct = callee.scope_struct
            inner.names["__struct_arguments__"] = struct_arguments
            self._bind_struct_aliases(struct_definition, inner, scope, node)
        formal = _formal_parameters(definition)
        values = [self.evaluate(a, scope) for a in arguments]
        for parameter, value in zip(formal, values):
            declarator_node = parameter.child_by_field_name("declarator")
            if declarator_node is None:  # an unnamed parameter
                continue
            name = declarator_name(declarator_node)
            by_reference = "&" in text(declarator_node) and "const" not in text(parameter)
            while isinstance(value, Cell) and isinstance(value.value, Reference):
                value = value.value.cell
            if isinstance(value, Cell):
                value = Reference(value) if by_reference else value.value
            if isinstance(value, Reference) and not by_reference and not isinstance(value.cell.value, (StructValue, ArrayValue)):
                value = value.cell.value
            if name is not None:
                inner.names[name] = Cell(name, value, mutable=not text(parameter).startswith("const"))
        for (kind, name), value in zip(parameters, template):
            inner.names[name] = Cell(name, value, mutable=False)
        if len(template) < len(parameters):
            self._deduce(parameters[len(template):], formal, values, inner, scope, node)
        if callee.this is not None:
            inner.this = callee.this
            if isinstance(callee.this, StructValue):
                for field_name, cell in callee.this.fields.items():
                    inner.names[field_name] = cell
        self.call_sites.append(self.location(scope, node))
        try:
            self.execute(definition.node.child_by_field_name("body"), inner)
        except _Return as result:
            return self.named(result.value, callee.name)  # `kv.stage()` -> %stage
        finally:
            self.call_sites.pop()
        return None

    def _deduce(self, missing, formal, values, inner: Scope, scope: Scope, node: Node):
        """Deduce the template parameters a call leaves out from its arguments: array extents
        (`float (&s)[kCount]`), struct template arguments; other type parameters are not read."""
        import re

        for kind, name in missing:
            deduced = None
            for parameter, value in zip(formal, values):
                while isinstance(value, (Reference, Cell)):
                    value = value.cell.value if isinstance(value, Reference) else value.value
                declared = text(parameter)
                if kind == "value" and isinstance(value, ArrayValue):
                    extent = re.search(r"\[\s*(\d+\s*\*\s*)?" + re.escape(name) + r"\s*\]", declared)
                    if extent:
                        factor = int(extent.group(1).split("*")[0]) if extent.group(1) else 1
                        deduced = len(value.cells) // factor
                        break
                if isinstance(value, StructValue) and re.search(r"\b" + re.escape(name) + r"\b", declared):
                    struct = self.program.structs[value.struct]
                    for (_, parameter_name), argument in zip(struct.definition.template_parameters, value.arguments):
                        if parameter_name == name:
                            deduced = argument
                    if deduced is not None:
                        break
            if deduced is None:
                if kind == "value":
                    raise self.error(scope, node, f"cannot deduce template parameter `{name}` of this call")
                deduced = TypeValue(name)  # a deduced type the lift does not read
            inner.names[name] = Cell(name, deduced, mutable=False)

    def call_lambda(self, function: LambdaValue, arguments: list[Node], scope: Scope, node: Node):
        inner = Scope(function.scope, source=function.source)
        declarator = function.node.child_by_field_name("declarator")
        formal = declarator.child_by_field_name("parameters").named_children if declarator else []
        for parameter, argument in zip(formal, arguments):
            declarator_node = parameter.child_by_field_name("declarator")
            if declarator_node is None:  # an unnamed parameter
                continue
            name = declarator_name(declarator_node)
            inner.names[name] = Cell(name, self.value(argument, scope))
        self.call_sites.append(self.location(scope, node))
        try:
            self.execute(function.node.child_by_field_name("body"), inner)
        except _Return as result:
            return result.value
        finally:
            self.call_sites.pop()
        return None

    def construct(self, type_value: TypeValue, arguments: list[Node], scope: Scope, node: Node):
        values = [self.value(a, scope) for a in arguments]
        return self.make_struct(type_value, values, scope, node)

    def make_struct(self, type_value: TypeValue, values: list, scope: Scope, node: Node):
        struct = self.program.structs.get(type_value.name)
        if struct is None:
            raise self.error(scope, node, f"unknown struct `{type_value.name}`")
        storage = self.profile.section("shared_storage")
        if type_value.name == storage.get("struct"):
            if not self.shared:
                from cubridge.frontends.cuda.kernel import shared_allocations

                self.shared = shared_allocations(self, type_value, scope, node)
            return SharedStorageValue(type_value.name, type_value.arguments)
        if type_value.name == self.profile.section("tile_scheduler").get("struct"):
            return SchedulerValue(type_value.name)
        fields = {}
        for i, (field_type, field_name, default) in enumerate(struct.fields):
            if i < len(values):
                value = values[i]
            elif default is not None:
                value = self.value(default, Scope(scope))
            else:
                value = None
            if isinstance(value, list):
                value = self.make_array(field_name, field_type, (len(value),), scope, node, value)
            elif value is None and field_name in struct.field_shapes:
                inner = self.template_scope(struct.definition, type_value.arguments, scope, node)
                shape = tuple(int(self.value(size, inner)) for size in struct.field_shapes[field_name])
                value = self.make_array(field_name, field_type, shape, scope, node)
            fields[field_name] = Cell(field_name, self.named(value, field_name))
        return StructValue(type_value.name, fields, type_value.arguments)

    def value_of_name(self, name: str, within: TypeValue, scope: Scope, node: Node):
        """A profile's name (`kHeadDim`, `kStages`) evaluated inside struct `within` (its template arguments
        bound), or as a file-level constant."""
        struct = self.program.structs[within.name]
        for (_, parameter), argument in zip(struct.definition.template_parameters, within.arguments):
            if parameter == name:
                return argument
        if name in self.program.constants:
            return self.constant(name, (), scope, node)
        return self.struct_member(within.name, within.arguments, name, scope, node)

    # =====================================================================================================
    # shared storage, scheduler
    def shared_ref(self, method: str, arguments: list[Node], scope: Scope, node: Node):
        """The tile or mbarrier a shared-storage method hands out; a tile's GEMM address (profile
        `shared_storage.addresses`: the same tile, as gemm_async takes it) is that tile."""
        index = self.value(arguments[0], scope) if arguments else None
        if isinstance(index, PerThread):
            index = self.uniform(index, scope, node)
        return SharedRef(self.profile.section("shared_storage").get("addresses", {}).get(method, method), index)

    def scheduler_call(self, method: str, arguments: list[Node], scope: Scope, node: Node):
        roles = self.profile.section("tile_scheduler")
        if method == roles.get("dynamic"):
            return False
        if method in (roles.get("first"), roles.get("next")):
            return Cursor()
        if method == roles.get("decode") and self._tile_decodes is not None:
            return self._work_tile(method, scope, node)
        if method == roles.get("valid") or method == roles.get("decode"):
            raise self.error(scope, node, f"`{method}` of the tile scheduler outside its tile loop")
        raise self.error(scope, node, f"tile scheduler method `{method}` is not in profile {self.profile.name}")

    def _work_tile(self, method: str, scope: Scope, node: Node) -> StructValue:
        """The decoded work tile: an object of the struct `decode` returns, its three fields (q_tile, head,
        batch in order) the tile loop's block arguments."""
        scheduler = self.program.structs[self.profile.section("tile_scheduler")["struct"]]
        decode = scheduler.methods[method][0].node
        returned = text(decode.child_by_field_name("type"))
        struct = self.program.structs.get(returned)
        if struct is None or len(struct.fields) != 3:
            raise self.error(scope, node, f"the scheduler's `{method}` returns `{returned}`, not a struct of three "
                                          "fields (q_tile, head, batch)")
        return StructValue(returned, {name: Cell(name, Run(value), mutable=False)
                                      for (_, name, _), value in zip(struct.fields, self._tile_decodes)})

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
        raise _Return(self.value(node.named_children[0], scope) if node.named_children else None)

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

    def lift_worker(self, begin: int, end: int, threads, branch: Node, scope: Scope):
        import re

        roles = self.profile.section("roles")
        suffix = roles.get("function_suffix", "")
        called = re.search(r"\b(\w+)" + re.escape(suffix) + r"\b", text(branch)) if suffix else None
        named = next((role for call, role in roles.get("names", {}).items() if call in text(branch)), None)
        name = called.group(1) if called else named or f"role{len(self.kernel.workers)}"
        worker = WorkerOp(name, (begin, end))
        self.kernel.body.block.add_op(worker)
        saved = (self.block, self.worker, self.worker_constants, self.active)
        self.block, self.worker, self.worker_constants, self.active = worker.body.block, worker, {}, threads
        self.role_registers = None
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
        finally:
            self.block, self.worker, self.worker_constants, self.active = saved
        worker.body.block.args[0].name_hint = "instance" if worker.sym_name.data == "producer" else "group"
        if self.role_registers is not None:
            worker.properties["regs"] = IntegerAttr(self.role_registers, 64)
        worker.location = self.location(scope, branch)

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
        if condition is None:
            self.tile_loop(node, initializer, update, body, inner)
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
    def tile_loop(self, node: Node, initializer: Node | None, update: Node | None, body: Node, scope: Scope):
        if self.worker is None:
            raise self.error(scope, node, "the tile loop outside any worker role")
        if initializer is not None:
            self.execute(initializer, scope) if initializer.type == "declaration" else self.evaluate(initializer, scope)
        statements = body.named_children if body.type == "compound_statement" else [body]
        check = next((i for i, s in enumerate(statements) if self._is_valid_check(s, scope)), None)
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
        from cubridge.frontends.cuda.elements import as_reduction, free_elements, REDUCING

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
        from cubridge.frontends.cuda.elements import element_layout, free_elements

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
                from cubridge.frontends.cuda.elements import _Cell

                packed = self.materialize_fragment([_Cell(pairs[j]) for j in range(count)], True, scope, node)
                stage = None if ref.index is None else self.as_index(ref.index, scope, node)
                self.emit(StoreOp(packed, buffer, [stage] if stage is not None else []), scope, node)
            else:
                self._emit_tensor_store(record)

    def _tensor_element_store(self, target, value, scope: Scope, node: Node):
        """`tensor[linear index] = row value` by the threads holding each row: a cuir.store of a row vector."""
        from cubridge.frontends.cuda.elements import element_layout

        index = target.index
        if not isinstance(index, Affine):
            raise self.error(scope, node, "a global store whose index is not the thread's row")
        from cubridge.frontends.cuda.elements import halves

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
                and all(_same_value(a, b) for a, b in zip(indices_of(last), indices))):
            raise self.error(scope, node, f"panel {panel} of `{name}` does not continue the {transfer} of its panel 0")
        self.copy_panels[last] = panel + 1

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


# The profile's math ops on compile-time numbers (folded where the lift meets them)
_FOLDED_MATH = {
    "maxnumf": max, "minnumf": min, "fma": lambda a, b, c: a * b + c, "log": pymath.log, "exp": pymath.exp,
    "exp2": lambda x: 2.0 ** x, "log2": pymath.log2, "divf": lambda a, b: a / b, "sqrt": pymath.sqrt,
    "rsqrt": lambda x: 1.0 / pymath.sqrt(x), "absf": abs, "erf": pymath.erf, "floor": pymath.floor,
    "ceil": pymath.ceil, "trunc": pymath.trunc, "powf": pymath.pow, "sin": pymath.sin, "cos": pymath.cos,
}


def _same_value(a: SSAValue, b: SSAValue) -> bool:
    """Whether two values are computed alike: the same value, or pure ops of one kind on alike operands (a
    panel's coordinates are recomputed for every panel, a score's slope for every element; CSE merges them once
    the lift is done). A captured table's read counts as pure: the tables are read-only in the kernel."""
    if a is b:
        return True
    if not (isinstance(a.owner, Operation) and isinstance(b.owner, Operation)):
        return False
    x, y = a.owner, b.owner
    return (x.name == y.name and x.name.startswith(("arith.", "math.", "cuir.dim", "cuir.gather"))
            and x.properties == y.properties
            and x.attributes == y.attributes and len(x.operands) == len(y.operands)
            and all(_same_value(p, q) for p, q in zip(x.operands, y.operands)))


@dataclass(frozen=True)
class LiftResult:
    module: ModuleOp
    entry: str
    note: str | None  # said on stderr when the entry point was chosen by default


def lift_file(path: str | Path, entry: str | None, profile: Profile, include_dirs: tuple[Path, ...]) -> LiftResult:
    """Lift entry point `entry` (None: the file's first) of the CUDA file at `path`."""
    from cubridge.frontends.cuda.program import load_program
    from cubridge.frontends.cuda.kernel import lift_kernel

    program = load_program(path, include_dirs)
    entries = program.entry_points()
    if not entries:
        raise CuBridgeError(f"lift: no __global__ function in {Path(path).name}", str(path))
    note = None
    if entry is None:
        chosen = entries[0]
        note = (f"note: lifting entry point {chosen.name}, the first of {len(entries)} in {Path(path).name} "
                f"(--lift=ENTRY picks another)")
    else:
        entry = "".join(entry.split())  # a template instance as written: `f<128, false>` is `f<128,false>`
        chosen = next((e for e in entries if e.name == entry), None)
        if chosen is None:
            raise unknown_entry(program, entry)
    lifter = Lifter(program, profile, chosen)
    module = lift_kernel(lifter)
    from cubridge.frontends.cuda.library import omitted_note

    omissions = omitted_note(lifter.omitted_calls)
    note = "\n".join(n for n in (note, omissions) if n) or None
    cse(module)
    dce(module)
    for op in list(module.walk()):
        if isinstance(op, DimOp) and not op.result.uses:  # a size no lifted op reads
            op.detach()
            op.erase()
    locate_materialized(module)
    return LiftResult(module, chosen.name, note)


def locate_materialized(module: ModuleOp) -> None:
    """Ops the lifter materialized without a construct of their own (hoisted constants, a map body's
    constants) take the location of the first use they were materialized for."""
    unlocated = [op for op in module.walk() if op.location == UNKNOWN_LOC and op is not module]
    while unlocated:
        for op in unlocated:
            users = [use.operation for result in op.results for use in result.uses]
            located = next((user for user in users if user.location != UNKNOWN_LOC), None)
            if located is not None:
                op.location = located.location
        remaining = [op for op in unlocated if op.location == UNKNOWN_LOC]
        if len(remaining) == len(unlocated):
            return
        unlocated = remaining


def _parameter_nodes(definition: Definition) -> list[Node]:
    """The parameter list's declarations of a function definition, in order (variadic ones included)."""
    declarator = definition.node.child_by_field_name("declarator")
    while declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator.child_by_field_name("parameters").named_children


def _formal_parameters(definition: Definition) -> list[Node]:
    """The named-or-not, non-variadic parameter declarations of a function definition, in order."""
    return [p for p in _parameter_nodes(definition)
            if p.type in ("parameter_declaration", "optional_parameter_declaration")]


def _takes(definition: Definition, count: int) -> bool:
    """Whether a call with `count` arguments fits the definition (defaulted parameters may be left out)."""
    kinds = [p.type for p in _parameter_nodes(definition)]
    required = kinds.count("parameter_declaration")
    if "variadic_parameter_declaration" in kinds:
        return count >= required
    return required <= count <= required + kinds.count("optional_parameter_declaration")
