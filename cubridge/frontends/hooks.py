"""Trace score_mod/mask_mod hooks with torch, as FlexAttention does, into `Expr`s.

`trace_hook` runs the hook once under `make_fx` on 0-d fake tensors (float32
`score`, int64 `b`, `h`, `q_idx`, `kv_idx`) with torch's core-ATen
decompositions and those of the activations (`DECOMPOSED`), indexing by
tensors turned into `aten.index` as FlexAttention's `TransformGetItemToIndex`
does. `CONVERTERS`, keyed by ATen operation, turns the graph into an `Expr`,
node by node; the graph's constants are the captured tensors, found by
identity among the tensors the hook's functions bind to names
(`captured_tensors`). Each node keeps the innermost spec line it was traced
from. `op_table` renders `CONVERTERS` for docs/specs.md.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.fx
from torch._decomp import core_aten_decompositions, get_decompositions
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.overrides import TorchFunctionMode

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import expr as E
from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr

aten = torch.ops.aten

CONTROL_FLOW = (
    "data-dependent Python control flow in a hook: use torch.where instead of "
    "if/and/or/not on traced values"
)
PYTHON_INDEX = (
    "a Python list or tuple cannot be indexed by a hook's traced value: make it a torch.tensor (the hook reads it "
    "as a captured tensor)"
)
PYTHON_KEY = (
    "a Python dict cannot be looked up by a hook's traced value (it hashes the tensor, not its value): make a "
    "torch.tensor table indexed by the value"
)
# Activations that are core ATen operations but are traced through their decompositions.
DECOMPOSED = (
    aten.gelu, aten.silu, aten.mish, aten.elu, aten.selu, aten.celu, aten.leaky_relu,
    aten.softplus, aten.hardtanh, aten.hardsigmoid, aten.hardswish, aten.logit,
)
_STACK_FRAME = re.compile(r'File "([^"]*)", line (\d+)')
# torch records a traced node's frames in the hook's own file only for functions registered with it (2.13 on)
RECORDS_HOOK_FRAMES = hasattr(torch.fx.proxy, "_register_stack_trace_anchor")


class _Unsupported(Exception):
    """A graph node the conversion cannot express; located at the node's line."""


class _TracedPythonIndex(Exception):
    """A traced value used as a Python index (`SLOPES[h]` of a list); located at the line that used it."""


# ----------------------------------------------------------------------------
# Tracing
# ----------------------------------------------------------------------------


def trace_hook(hook: Callable, arguments: tuple[str, ...], path: str, captures: dict[str, torch.Tensor]) -> Expr:
    """The hook's result as an `Expr` over `arguments` and `captures` (by name);
    any failure is a CuBridgeError at the line of `path` that caused it."""
    where = definition(hook)
    graph_module = _trace(hook, arguments, path, where)
    code = hook_code(hook)
    # where torch keeps no frame of the hook's own lines, its nodes are located at its `def` in the spec
    unrecorded_line = code.co_firstlineno if code.co_filename == path and not RECORDS_HOOK_FRAMES else None
    return _Conversion(graph_module, path, captures, where, unrecorded_line).run(arguments)


def hook_code(hook: Callable) -> types.CodeType:
    """The code of the hook's `def` (of the function a functools.partial wraps)."""
    while isinstance(hook, functools.partial):
        hook = hook.func
    return hook.__code__


def definition(hook: Callable) -> str:
    """`file:line` of the hook's `def` (of the function a functools.partial wraps)."""
    code = hook_code(hook)
    return f"{code.co_filename}:{code.co_firstlineno}"


class IndexWithTensors(TorchFunctionMode):
    """`table[i]` with tensor (or int) indices becomes `aten.index`, not a Python
    integer read from `i`, as in FlexAttention's TransformGetItemToIndex. A traced
    value made a Python index (a list indexed by `h`) is a `_TracedPythonIndex`."""

    def __torch_function__(self, func, _types, args=(), kwargs=None):
        if func is torch.Tensor.__index__:
            try:
                return func(*args, **(kwargs or {}))
            except GuardOnDataDependentSymNode:  # a real tensor (a captured 0-d one) has its Python int
                raise _TracedPythonIndex from None
        if func is torch.Tensor.__getitem__:
            table, index = args
            positions = index if isinstance(index, tuple) else (index,)
            if all(isinstance(p, torch.Tensor | int) and not isinstance(p, bool) for p in positions):
                tensors = [p if isinstance(p, torch.Tensor) else torch.tensor(p) for p in positions]
                return aten.index.Tensor(table, tensors)
        return func(*args, **(kwargs or {}))


@functools.cache
def _decomposition_table() -> dict:
    return {**core_aten_decompositions(), **get_decompositions(list(DECOMPOSED))}


def _trace(hook: Callable, arguments: tuple[str, ...], path: str, where: str) -> torch.fx.GraphModule:
    """The hook's ATen graph; `where` locates failures outside the spec file."""
    for function in reachable_functions(hook):
        _record_lines_of(function.__code__)
    examples = [torch.zeros((), dtype=torch.float32 if name == "score" else torch.int64) for name in arguments]

    def called_with_the_arguments(*values):  # make_fx would trace a defaulted parameter (`window=128`) as an input
        return hook(*values)

    trace = make_fx(
        torch.func.functionalize(called_with_the_arguments, remove="mutations_and_views"),  # `x += y` as `x = x + y`
        decomposition_table=_decomposition_table(),
        tracing_mode="fake",
        _allow_non_fake_inputs=True,  # captured tensors are real
        record_stack_traces=True,
    )
    try:
        with IndexWithTensors(), _fake_tensor_log_silenced():
            return trace(*examples)
    except Exception as error:  # the hook is user code: any failure is located there
        if isinstance(error, GuardOnDataDependentSymNode):
            raise CuBridgeError(CONTROL_FLOW, located(error, path, where)) from None
        if isinstance(error, _TracedPythonIndex):
            raise CuBridgeError(PYTHON_INDEX, located(error, path, where)) from None
        if isinstance(error, KeyError) and error.args and isinstance(error.args[0], torch.Tensor):
            raise CuBridgeError(PYTHON_KEY, located(error, path, where)) from None
        name = getattr(hook, "__name__", "the hook")
        raise failure(f"tracing {name}", error, path, where) from None


@contextlib.contextmanager
def _fake_tensor_log_silenced():
    """torch logs a traceback when an operation fails on fake tensors (a `torch.where` on an integer condition);
    the failure is reported as one located line instead."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


def _record_lines_of(code: types.CodeType) -> None:
    """Make torch keep stack frames of `code` and the functions nested in it on the
    graph nodes (make_fx records frames of registered functions only). On torch releases
    without that registry (2.11, on the GPU machines) a node's line is whatever frame torch
    kept, else the hook's `def` line (`_Conversion`)."""
    if not RECORDS_HOOK_FRAMES:
        return
    torch.fx.proxy._register_stack_trace_anchor(types.SimpleNamespace(__code__=code))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _record_lines_of(const)


def located(error: Exception, path: str, fallback: str) -> str:
    """`path:line` of the innermost frame of `path` that `error` went through, else `fallback`."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
    return f"{path}:{frames[-1].lineno}" if frames else fallback


def failure(doing: str, error: Exception, path: str, fallback: str) -> CuBridgeError:
    """A one-line error for user code in `path` that raised `error` while `doing` something."""
    lines = str(error).strip().splitlines()
    detail = f": {lines[0]}" if lines else ""
    return CuBridgeError(f"{doing} failed: {type(error).__name__}{detail}", located(error, path, fallback))


def _node_line(node: torch.fx.Node, path: str) -> int | None:
    """The innermost line of `path` on the stack that created `node`."""
    lines = [int(line) for file, line in _STACK_FRAME.findall(node.meta.get("stack_trace") or "") if file == path]
    return lines[-1] if lines else None


# ----------------------------------------------------------------------------
# Captured tensors
# ----------------------------------------------------------------------------


def captured_tensors(hook: Callable) -> dict[str, torch.Tensor]:
    """Tensors the hook can read, by variable name: module globals and closure variables
    of the hook and of the functions it reaches."""
    found: dict[str, torch.Tensor] = {}
    for function in reachable_functions(hook):
        code = function.__code__
        bound = [(name, function.__globals__.get(name)) for name in sorted(global_names(code))]
        bound += [(name, cell_value(cell)) for name, cell in zip(code.co_freevars, function.__closure__ or ())]
        for name, value in bound:
            if not isinstance(value, torch.Tensor):
                continue
            if name in found and found[name] is not value:
                raise CuBridgeError(
                    f"two different captured tensors are named '{name}'; rename one",
                    f"{code.co_filename}:{code.co_firstlineno}",
                )
            found[name] = value
    return found


def reachable_functions(hook: Callable) -> list[types.FunctionType]:
    """The hook and the functions it calls by name: those in its closure (FlexAttention's
    and_masks / or_masks keep the functions they combine there), a functools.partial or a
    bound method, and the module-level functions of its own file that it names."""
    found: dict[types.FunctionType, None] = {}
    pending: list = [hook]
    while pending:
        function = pending.pop()
        if isinstance(function, functools.partial):
            pending += [function.func, *function.args, *function.keywords.values()]
            continue
        if isinstance(function, types.MethodType):  # a bound method: its function (its `self` is a value read)
            pending.append(function.__func__)
            continue
        if not isinstance(function, types.FunctionType) or function in found:
            continue
        found[function] = None
        for cell in function.__closure__ or ():
            value = cell_value(cell)
            pending.extend(value if isinstance(value, tuple | list) else [value])
        code = function.__code__
        for name in global_names(code):
            value = function.__globals__.get(name)
            if isinstance(value, types.FunctionType) and value.__code__.co_filename == code.co_filename:
                pending.append(value)
    return list(found)


def referenced_values(function: types.FunctionType) -> list[tuple[str, object]]:
    """The non-tensor values `function` reads by name, sorted: module globals it names (those bound), then
    its closure variables (prefixed `closure.`)."""
    code = function.__code__
    found = [(name, function.__globals__[name]) for name in sorted(global_names(code))
             if name in function.__globals__]
    found += [(f"closure.{name}", cell_value(cell)) for name, cell in zip(code.co_freevars, function.__closure__ or ())]
    return [(name, value) for name, value in found if not isinstance(value, torch.Tensor)]


# Values whose attributes hook code does not read for a result: scalars, containers, tensors and functions (their
# contents, shapes or code are read otherwise)
_WITHOUT_READ_ATTRIBUTES = (bool, int, float, str, type(None), torch.dtype, tuple, list, dict, functools.partial,
                            torch.Tensor, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def read_attributes(value, names: frozenset[str]) -> list[tuple[str, object]]:
    """(name, attribute) of `value`, sorted, for each of `names` it has: what hook code whose names (`global_names`,
    which holds the attribute names the code reads) are `names` can have read from `value` as `value.name`, where
    `value` is an object, a class or a module it reads (a `config.window`, a `self.window`)."""
    if isinstance(value, _WITHOUT_READ_ATTRIBUTES):
        return []
    found = []
    for name in sorted(names):
        try:
            found.append((name, getattr(value, name)))
        except AttributeError:  # not one of this value's: the code read it from something else
            continue
    return found


def cell_value(cell):
    """A closure cell's value; None while the cell is unassigned."""
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return None


def global_names(code: types.CodeType) -> set[str]:
    """The global names `code` and the code nested in it can read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


# ----------------------------------------------------------------------------
# Conversion of the ATen graph
# ----------------------------------------------------------------------------


def _kind_of(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return BOOL
    return FLOAT if dtype.is_floating_point else INT


@dataclass(frozen=True)
class _Slice:
    """Captured tensor `name` indexed in some dimensions: `indices[d]` is the index of
    dimension d, or None while d is free. Indexing every dimension gives a gather."""

    name: str
    kind: str
    shape: tuple[int, ...]
    indices: tuple[Expr | None, ...]

    def free(self) -> list[int]:
        return [d for d, index in enumerate(self.indices) if index is None]

    def indexed(self, positions: list) -> Expr | _Slice:
        """Index the free dimensions in order with `positions` (None keeps a dimension)."""
        free = self.free()
        if len(positions) > len(free):
            raise _Unsupported(f"captured tensor '{self.name}' indexed in more than its {len(self.shape)} dimensions")
        indices = list(self.indices)
        for dimension, position in zip(free, positions):
            if position is not None:
                indices[dimension] = self._index(position, dimension)
        if None in indices:
            return replace(self, indices=tuple(indices))
        return E.gather(self.name, tuple(indices), self.kind)

    def _index(self, position, dimension: int) -> Expr:
        index = _expr(position)
        if index.kind != INT:
            raise _Unsupported(f"captured tensor '{self.name}' indexed by a {index.kind} value")
        value = E.const_value(index)
        return E.constant(value + self.shape[dimension]) if value is not None and value < 0 else index


def _expr(value) -> Expr:
    """A scalar operand as an Expr (Python numbers become constants)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, _Slice):
        shape = [value.shape[d] for d in value.free()]
        raise _Unsupported(
            f"a {shape} part of captured tensor '{value.name}' used as a scalar: index every dimension"
        )
    if isinstance(value, bool | int | float):
        return E.constant(value)
    raise _Unsupported(f"a {type(value).__name__} operand")


@dataclass(frozen=True)
class Converter:
    """How one ATen operation becomes Exprs, and what it lowers to (for the docs)."""

    convert: Callable
    lowered_to: str


CONVERTERS: dict[torch._ops.OpOverload, Converter] = {}


def _converts(lowered_to: str, *overloads):
    def register(convert: Callable) -> Callable:
        for overload in overloads:
            CONVERTERS[overload] = Converter(convert, lowered_to)
        return convert

    return register


class _Conversion:
    def __init__(
        self, graph_module: torch.fx.GraphModule, path: str, captures: dict[str, torch.Tensor], definition: str,
        unrecorded_line: int | None,
    ):
        self.graph_module = graph_module
        self.path = path
        self.capture_names = {id(tensor): name for name, tensor in reversed(captures.items())}
        self.definition = definition
        self.unrecorded_line = unrecorded_line  # the line of a node torch kept no frame of (None: unknown)
        self.values: dict[torch.fx.Node, object] = {}

    def run(self, arguments: tuple[str, ...]) -> Expr:
        names = iter(arguments)
        for node in self.graph_module.graph.nodes:
            if node.op == "placeholder":
                name = next(names)
                self.values[node] = E.argument(name, E.HOOK_ARGUMENTS[name])
            elif node.op == "output":
                return self._result(node)
            else:
                self.values[node] = self._located(node)
        raise CuBridgeError("the traced hook has no result", self.definition)

    def _where(self, node: torch.fx.Node) -> str:
        line = _node_line(node, self.path)
        return f"{self.path}:{line}" if line is not None else self.definition

    def _located(self, node: torch.fx.Node):
        try:
            value = self._convert(node)
        except _Unsupported as error:
            raise CuBridgeError(str(error), self._where(node)) from None
        if isinstance(value, Expr):
            line = _node_line(node, self.path)
            value = E.with_line(E.cast(value, _kind_of(node.meta["val"].dtype)),
                                self.unrecorded_line if line is None else line)
        return value

    def _convert(self, node: torch.fx.Node):
        if node.op == "get_attr":
            return self._constant(getattr(self.graph_module, node.target))
        converter = CONVERTERS.get(node.target)
        if node.op != "call_function" or converter is None:
            raise _Unsupported(f"unsupported operation '{node.target}' in a hook")
        args = torch.fx.node.map_arg(node.args, self.values.__getitem__)
        kwargs = torch.fx.node.map_arg(node.kwargs, self.values.__getitem__)
        return converter.convert(*args, **kwargs)

    def _constant(self, tensor: torch.Tensor) -> Expr | _Slice:
        """A captured tensor (0-d ones are constants), or a 0-d constant the hook made."""
        if tensor.dim() == 0:
            return E.constant(tensor.item())
        name = self.capture_names.get(id(tensor))
        if name is None:
            raise _Unsupported(
                f"the hook reads a {list(tensor.shape)} tensor that is not a module-level or closure "
                "variable of the spec; define it as one"
            )
        return _Slice(name, _kind_of(tensor.dtype), tuple(tensor.shape), (None,) * tensor.dim())

    def _result(self, node: torch.fx.Node) -> Expr:
        (result,) = node.args
        if isinstance(result, tuple | list):
            raise CuBridgeError(f"a hook returns one value, not {len(result)}", self.definition)
        value = self.values[result] if isinstance(result, torch.fx.Node) else result
        try:
            return _expr(value)
        except _Unsupported as error:
            raise CuBridgeError(f"the hook returns {error}", self.definition) from None


# ----------------------------------------------------------------------------
# Converters
# ----------------------------------------------------------------------------


def _binary(op: str) -> Callable:
    return lambda lhs, rhs: E.binary(op, _expr(lhs), _expr(rhs))


def _unary(op: str) -> Callable:
    return lambda operand: E.unary(op, _expr(operand))


def _scaled(value, alpha) -> Expr:
    return _expr(value) if alpha == 1 else E.binary("mul", _expr(value), E.constant(alpha))


@_converts("arith.addf / addi", aten.add.Tensor, aten.add.Scalar)
def _add(lhs, rhs, alpha=1):
    return E.binary("add", _expr(lhs), _scaled(rhs, alpha))


@_converts("arith.subf / subi", aten.sub.Tensor, aten.sub.Scalar)
def _sub(lhs, rhs, alpha=1):
    return E.binary("sub", _expr(lhs), _scaled(rhs, alpha))


_converts("arith.mulf / muli", aten.mul.Tensor, aten.mul.Scalar)(_binary("mul"))
_converts("arith.maximumf / maxsi", aten.maximum.default)(_binary("max"))
_converts("arith.minimumf / minsi", aten.minimum.default)(_binary("min"))
_converts("arith.maxnumf / maxsi (NaN-ignoring)", aten.fmax.default)(_binary("fmax"))
_converts("arith.minnumf / minsi (NaN-ignoring)", aten.fmin.default)(_binary("fmin"))
_converts("arith.remsi and a sign fix-up (torch's `%`); floats: a - floor(a / b) * b",
          aten.remainder.Tensor, aten.remainder.Scalar)(_binary("mod"))
_converts("arith.remsi (the sign of the dividend); floats: math.copysign(a - trunc(a / b) * b, a)",
          aten.fmod.Tensor, aten.fmod.Scalar)(_binary("fmod"))

_DIVISIONS = {None: "div", "floor": "floordiv", "trunc": "truncdiv"}


@_converts(
    "arith.divf; floor: arith.floordivsi or divf + math.floor; trunc: arith.divsi or divf + floor/ceil",
    aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode,
)
def _div(lhs, rhs, rounding_mode=None):
    return E.binary(_DIVISIONS[rounding_mode], _expr(lhs), _expr(rhs))


@_converts("arith.mulf chains for small integer exponents, math.sqrt for 0.5, else math.powf",
           aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow(base, exponent):
    base, exponent = _expr(base), _expr(exponent)
    power = E.const_value(exponent)
    if power is not None and float(power).is_integer() and abs(power) <= 16:
        product = _integer_power(base, abs(int(power)))
        return product if power >= 0 else E.binary("div", E.constant(1.0), product)
    if power == 0.5:
        return E.unary("sqrt", base)
    if FLOAT not in (base.kind, exponent.kind):
        raise _Unsupported("an integer power with an exponent that is not a constant")
    return E.binary("pow", E.cast(base, FLOAT), exponent)


def _integer_power(base: Expr, exponent: int) -> Expr:
    """base ** exponent by repeated squaring."""
    result, square = E.cast(E.constant(1), base.kind), base
    while exponent:
        if exponent & 1:
            result = square if E.const_value(result) == 1 else E.binary("mul", result, square)
        exponent >>= 1
        if exponent:
            square = E.binary("mul", square, square)
    return result


for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    _converts(f"arith.cmpf / cmpi {_op}", getattr(aten, _op).Tensor, getattr(aten, _op).Scalar)(_binary(_op))

_converts("arith.negf / subi", aten.neg.default)(_unary("neg"))
_converts("math.absf / absi", aten.abs.default)(_unary("abs"))
for _op in ("exp", "exp2", "log", "tanh", "erf", "sin", "cos", "sqrt", "tan", "asin", "acos", "atan", "sinh", "cosh"):
    _converts(f"math.{_op}", getattr(aten, _op).default)(_unary(_op))
_converts("math.atan2", aten.atan2.default)(_binary("atan2"))
_converts("math.copysign", aten.copysign.Tensor, aten.copysign.Scalar)(_binary("copysign"))
_converts("0.5 * math.tanh(0.5 * x) + 0.5", aten.sigmoid.default)(_unary("sigmoid"))


@_converts("math.exp, arith.subf", aten.expm1.default)
def _expm1(operand):
    return E.binary("sub", E.unary("exp", _expr(operand)), E.constant(1.0))


@_converts("math.log, arith.addf", aten.log1p.default)
def _log1p(operand):
    return E.unary("log", E.binary("add", E.constant(1.0), _expr(operand)))


@_converts("math.log, arith.mulf", aten.log2.default)
def _log2(operand):
    return E.binary("mul", E.unary("log", _expr(operand)), E.constant(1 / math.log(2)))


@_converts("math.log, arith.mulf", aten.log10.default)
def _log10(operand):
    return E.binary("mul", E.unary("log", _expr(operand)), E.constant(1 / math.log(10)))


@_converts("math.sqrt, arith.divf", aten.rsqrt.default)
def _rsqrt(operand):
    return E.binary("div", E.constant(1.0), E.unary("sqrt", _expr(operand)))


@_converts("arith.divf", aten.reciprocal.default)
def _reciprocal(operand):
    return E.binary("div", E.constant(1.0), _expr(operand))


def _rounding(op: str) -> Callable:
    def convert(operand):
        operand = _expr(operand)
        return E.unary(op, operand) if operand.kind == FLOAT else operand

    return convert


_converts("math.floor", aten.floor.default)(_rounding("floor"))
_converts("math.ceil", aten.ceil.default)(_rounding("ceil"))
_converts("math.floor / ceil, arith.select", aten.trunc.default)(_rounding("trunc"))
_converts("math.roundeven (half to even)", aten.round.default)(_rounding("round"))


@_converts("arith.mulf / divf, math.roundeven (torch's: round(x * 10^d) / 10^d, round(x / 10^-d) * 10^-d)",
           aten.round.decimals)
def _round_decimals(operand, decimals):
    operand = _expr(operand)
    if decimals < 0:
        scale = E.constant(10.0**-decimals)
        return E.binary("mul", E.unary("round", E.binary("div", operand, scale)), scale)
    scale = E.constant(10.0**decimals)
    return E.binary("div", E.unary("round", E.binary("mul", operand, scale)), scale)


@_converts("arith.maximumf / maxsi", aten.relu.default)
def _relu(operand):
    operand = _expr(operand)
    return E.binary("max", operand, E.cast(E.constant(0), operand.kind))


@_converts("arith.cmpf / cmpi, arith.select", aten.sign.default)
def _sign(operand):
    operand = _expr(operand)
    zero, one, minus_one = (E.cast(E.constant(v), operand.kind) for v in (0, 1, -1))
    negative = E.select(E.binary("lt", operand, zero), minus_one, zero)
    return E.select(E.binary("gt", operand, zero), one, negative)


@_converts("math.copysign, arith.cmpf olt (the sign bit of -0.0 and of NaN too); integers: arith.cmpi slt",
           aten.signbit.default)
def _signbit(operand):
    operand = _expr(operand)
    if operand.kind != FLOAT:
        return E.binary("lt", operand, E.constant(0))
    return E.binary("lt", E.binary("copysign", E.constant(1.0), operand), E.constant(0.0))


@_converts("arith.cmpf une (x != x); integers: false", aten.isnan.default)
def _isnan(operand):
    operand = _expr(operand)
    if operand.kind != FLOAT:
        return E.constant(False)
    return E.binary("ne", operand, operand)


@_converts("math.absf, arith.cmpf oeq inf; integers: false", aten.isinf.default)
def _isinf(operand):
    operand = _expr(operand)
    if operand.kind != FLOAT:
        return E.constant(False)
    return E.binary("eq", E.unary("abs", operand), E.constant(math.inf))


@_converts("arith.maximumf / maxsi, arith.minimumf / minsi",
           aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(operand, min=None, max=None):
    result = _expr(operand)
    if min is not None:
        result = E.binary("max", result, _expr(min))
    if max is not None:
        result = E.binary("min", result, _expr(max))
    return result


_converts("arith.select", aten.where.self)(lambda c, a, b: E.select(_boolean(c), _expr(a), _expr(b)))


def _boolean(value) -> Expr:
    return E.cast(_expr(value), BOOL)


def _logical(op: str) -> Callable:
    return lambda lhs, rhs: E.binary(op, _boolean(lhs), _boolean(rhs))


_converts("arith.andi", aten.logical_and.default)(_logical("and"))
_converts("arith.ori", aten.logical_or.default)(_logical("or"))
_converts("arith.cmpi ne", aten.logical_xor.default)(_logical("ne"))
_converts("arith.xori", aten.logical_not.default)(lambda operand: E.unary("not", _boolean(operand)))


def _bitwise(boolean_op: str, integer_op: str) -> Callable:
    """A bitwise operation: logic on booleans, bits of integers (a boolean operand counts as 0 or 1)."""

    def convert(lhs, rhs):
        lhs, rhs = _expr(lhs), _expr(rhs)
        if lhs.kind == BOOL and rhs.kind == BOOL:
            return E.binary(boolean_op, lhs, rhs)
        return E.binary(integer_op, lhs, rhs)

    return convert


_converts("arith.andi", aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(_bitwise("and", "bitand"))
_converts("arith.ori", aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(_bitwise("or", "bitor"))
_converts("arith.cmpi ne (booleans) / xori (integers)", aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(
    _bitwise("ne", "bitxor"))
_converts("arith.shrsi (torch's `>>`: arithmetic)", aten.__rshift__.Scalar, aten.__rshift__.Tensor,
          aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar,
          aten.bitwise_right_shift.Scalar_Tensor)(_binary("shr"))
_converts("arith.shli", aten.__lshift__.Scalar, aten.__lshift__.Tensor, aten.bitwise_left_shift.Tensor,
          aten.bitwise_left_shift.Tensor_Scalar, aten.bitwise_left_shift.Scalar_Tensor)(_binary("shl"))


@_converts("arith.xori", aten.bitwise_not.default)
def _bitwise_not(operand):
    operand = _expr(operand)
    if operand.kind == BOOL:
        return E.unary("not", operand)
    return E.binary("bitxor", operand, E.constant(-1))  # ~x: every bit flipped, -x - 1


@_converts("arith.constant", aten.full.default)
def _full(size, fill_value, **_):
    if list(size):
        raise _Unsupported(f"a {list(size)} tensor created in a hook (hooks compute one element)")
    return _expr(fill_value)


_converts("arith.constant", aten.scalar_tensor.default)(lambda value, **_: _expr(value))
_converts("arith.constant", aten.full_like.default)(lambda like, fill_value, **_: _expr(fill_value))


@_converts("arith.sitofp / fptosi / cmp (dtype conversions; floats compute in f32)", aten._to_copy.default)
def _to_copy(operand, dtype=None, **_):
    return E.cast(_expr(operand), _kind_of(dtype)) if dtype is not None else _expr(operand)


_converts("(no op)", aten.clone.default, aten.alias.default, aten.alias_copy.default, aten.detach_copy.default,
          aten.lift_fresh_copy.default)(lambda operand, **_: operand)


@_converts("cuir.gather", aten.index.Tensor)
def _index(table, indices):
    if not isinstance(table, _Slice):
        raise _Unsupported("indexing a value that is not a captured tensor")
    return table.indexed(list(indices))


@_converts("cuir.gather", aten.select.int, aten.select_copy.int)
def _select(table, dimension, index):
    if not isinstance(table, _Slice):
        raise _Unsupported("indexing a value that is not a captured tensor")
    free = len(table.free())
    return table.indexed([None] * (dimension % free) + [index])


# ----------------------------------------------------------------------------
# The docs' table
# ----------------------------------------------------------------------------


def op_table() -> str:
    """The supported ATen operations as a markdown table (docs/specs.md holds a copy)."""
    by_lowering: dict[str, list[str]] = {}
    for overload, converter in CONVERTERS.items():
        by_lowering.setdefault(converter.lowered_to, []).append(f"`{overload}`")
    rows = ["| ATen operations | lowered to |", "| --- | --- |"]
    rows += [f"| {', '.join(names)} | {lowered_to} |" for lowered_to, names in by_lowering.items()]
    decomposed = ", ".join(f"`{packet._qualified_op_name.replace('::', '.')}`" for packet in DECOMPOSED)
    rows += ["", f"Traced through their decompositions (with the core-ATen ones): {decomposed}."]
    return "\n".join(rows) + "\n"
