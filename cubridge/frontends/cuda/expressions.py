"""The expression half of the Lifter (mixed into it): C++ expressions, and the run-time scalars every other
part emits through.

An expression evaluates to a compile-time value (folded: ints, floats, bools, types), a run-time scalar
(`Run`: `arith` on index and i1 with C++ `int` semantics), a value per thread (`PerThread`, made uniform per
warp group where CuIR needs one), or a symbolic element value of a fragment (`Expr`, elements.py). Constants
are hoisted to the top of the worker they are used in.
"""

from __future__ import annotations

import numpy as np
from tree_sitter import Node
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    f32,
)
from xdsl.ir import Operation, SSAValue

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect.cuir import DimOp
from cubridge.frontends.cuda.elements import Affine, Expr, is_symbolic
from cubridge.frontends.cuda.library import BaseTiles, Omitted, SharedArray
from cubridge.frontends.cuda.mma import GemmChain
from cubridge.frontends.cuda.program import text
from cubridge.frontends.cuda.values import (
    ArrayValue,
    Cell,
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
    Scope,
    SharedPointer,
    SharedRef,
    SharedStorageValue,
    SharedStore,
    Stride,
    StrideTerm,
    StructValue,
    TensorArgument,
    TensorStore,
    TypeValue,
)

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


class ExpressionLifting:
    """C++ expressions and run-time scalars (mixed into `Lifter`)."""

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
        if isinstance(left, SharedRef) and operator == "+" and isinstance(right, Run) and \
                isinstance(left.offset, int) and left.offset == 0:
            return SharedRef(left.name, left.index, right)  # a run-time panel of a tile (a cluster CTA's)
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
            active = condition.values[self.active]
            if active.size and (active == active[0]).all():  # the same for the active threads: one branch
                branch = "consequence" if active[0] else "alternative"
                return self.value(node.child_by_field_name(branch), scope)
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
        if name in ("min", "max", "abs", "__builtin_huge_valf", "__int_as_float", "__shfl_sync", "__trap") or \
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
