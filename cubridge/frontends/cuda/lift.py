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

`Lifter` holds the walk's state and what every part shares (errors and locations, emitting, compile-time
names, calls and inlining); the parts are mixins: `expressions.py` (C++ expressions, run-time scalars),
`statements.py` (statements, control flow, worker roles, the tile loop), `primitives.py` (the profile's
primitive calls, element stores), `elements.py` (per-element values of register fragments), `mma.py`
(Ampere's mma.sync idioms) and `library.py` (whole-tile libraries and grid-launched kernels).
"""

from __future__ import annotations

import math as pymath  # elements.py's `math` is xDSL's math dialect
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    BFloat16Type,
    CallSiteLoc,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntAttr,
    ModuleOp,
    StringAttr,
    f32,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect.cuir import AllocOp, DimOp, ForEachTileOp, KernelOp, TrapOp, WorkerOp
from cubridge.frontends.cuda.elements import Expr, FragmentLifting, is_symbolic
from cubridge.frontends.cuda.expressions import ExpressionLifting
from cubridge.frontends.cuda.library import Allocator, LibraryLifting, Omitted, omitted_note
from cubridge.frontends.cuda.mma import MmaSyncLifting
from cubridge.frontends.cuda.primitives import Barrier, PrimitiveLifting
from cubridge.frontends.cuda.profile import Profile
from cubridge.frontends.cuda.program import (
    Definition,
    EntryPoint,
    Program,
    declarator_name,
    load_program,
    text,
    unknown_entry,
    walk,
)
from cubridge.frontends.cuda.statements import Return, StatementLifting
from cubridge.frontends.cuda.values import (
    NOT_BOUND,
    ArrayValue,
    Cell,
    Cursor,
    FunctionValue,
    LambdaValue,
    PerThread,
    Reference,
    Run,
    SchedulerValue,
    Scope,
    SharedRef,
    SharedStorageValue,
    Stride,
    StructValue,
    TensorArgument,
    TypeValue,
)

ELEMENT_TYPES = {"__nv_bfloat16": BFloat16Type(), "__half": Float16Type(), "float": Float32Type()}


class Lifter(ExpressionLifting, StatementLifting, PrimitiveLifting, MmaSyncLifting, FragmentLifting, LibraryLifting):
    """The walk of one entry point: its state, the core it shares (errors, locations, emitting, compile-time
    names, calls and inlining), and the mixins that lift expressions, statements, primitives, mma.sync
    fragments, element values and tile libraries."""

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
        self.emitted_threads = np.zeros(0, dtype=bool)  # the threads the current role's ops ran on (lift_kernel sizes it)
        self.warp_roles_of: dict[WorkerOp, set[int]] = {}  # a role's warps split off as warp roles
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
        if self.worker is None and not self.kernel_pass and not isinstance(op, (AllocOp, arith.ConstantOp)) and \
                not _refuses(op):
            raise self.error(scope, node, f"`{op.name}` outside any worker role")
        op.location = self.location(scope, node)
        self.block.add_op(op)
        if self.worker is not None:
            self.emitted_threads |= self.active
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
        if callee.scope_struct is None and callee.name in self.profile.section("shared_storage").get(
                "barrier_functions", ()):
            return self.shared_ref(callee.name, arguments, scope, node)
        primitive = self.profile.primitive(callee.name) if callee.scope_struct is None else None
        if primitive is not None:
            return self.primitive_call(callee, primitive, arguments, scope, node)
        if callee.scope_struct is None and callee.name == self.profile.section("parameters").get("table_read"):
            return self.table_read(arguments, scope, node)
        if callee.name == "__trap" and callee.scope_struct is None:
            self.emit(TrapOp(), scope, node)
            return None
        if callee.name == "__builtin_huge_valf" and callee.scope_struct is None:
            return float("inf")
        if callee.name == "__int_as_float" and callee.scope_struct is None:  # the lowering's NaN literal
            bits = self.value(arguments[0], scope)
            if not isinstance(bits, int) or isinstance(bits, bool):
                raise self.error(scope, node, "only __int_as_float of a constant (a float's bits) is lifted")
            return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
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
        except Return as result:
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
        except Return as result:
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


# The profile's math ops on compile-time numbers (folded where the lift meets them)
_FOLDED_MATH = {
    "maxnumf": max, "minnumf": min, "fma": lambda a, b, c: a * b + c, "log": pymath.log, "exp": pymath.exp,
    "exp2": lambda x: 2.0 ** x, "log2": pymath.log2, "divf": lambda a, b: a / b, "sqrt": pymath.sqrt,
    "rsqrt": lambda x: 1.0 / pymath.sqrt(x), "absf": abs, "erf": pymath.erf, "floor": pymath.floor,
    "ceil": pymath.ceil, "trunc": pymath.trunc, "powf": pymath.pow, "sin": pymath.sin, "cos": pymath.cos,
    "tan": pymath.tan, "asin": pymath.asin, "acos": pymath.acos, "atan": pymath.atan, "atan2": pymath.atan2,
    "sinh": pymath.sinh, "cosh": pymath.cosh, "roundeven": round, "copysign": pymath.copysign,
}


@dataclass(frozen=True)
class LiftResult:
    module: ModuleOp
    entry: str
    note: str | None  # said on stderr when the entry point was chosen by default


def lift_file(path: str | Path, entry: str | None, profile: Profile, include_dirs: tuple[Path, ...]) -> LiftResult:
    """Lift entry point `entry` (None: the file's first) of the CUDA file at `path`."""
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


def _refuses(op: Operation) -> bool:
    """Whether `op` may sit in the kernel body before the roles: a refusal (`if (sizes...) __trap();`), its
    condition's index arithmetic and sizes, and its branch."""
    return isinstance(op, (TrapOp, DimOp, scf.IfOp, scf.YieldOp)) or op.name.startswith("arith.")


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
