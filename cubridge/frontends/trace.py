"""Trace a score_mod/mask_mod hook into an `Expr` by running it on proxies.

The hook runs once with `Traced` stand-ins for its arguments. Python
operators and the supported torch functions build `Expr` nodes; indexing a
captured tensor with traced indices becomes a `gather`. Anything else (an
unsupported torch function, or Python control flow that needs the value of a
traced expression) is a `CuBridgeError` located at the hook's line in the spec.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import expr as E
from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr


class Tracer:
    """Traces hooks of one spec file; `captures` maps a captured tensor to its input name."""

    def __init__(self, spec_path: str, captures: dict[str, torch.Tensor]):
        self.spec_path = spec_path
        self.capture_names = {id(tensor): name for name, tensor in captures.items()}

    def user_line(self) -> int:
        """The innermost line of the spec file on the current call stack."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.spec_path:
                return frame.f_lineno
            frame = frame.f_back
        return 1

    def error(self, message: str) -> CuBridgeError:
        return CuBridgeError(message, f"{self.spec_path}:{self.user_line()}")

    def trace(self, hook: Callable, arguments: tuple[str, ...]) -> Expr:
        proxies = [Traced(self, E.argument(name, E.HOOK_ARGUMENTS[name])) for name in arguments]
        result = hook(*proxies)
        return self.lift(result, "the hook's result")

    def lift(self, value, what: str) -> Expr:
        """The Expr of a traced value or Python constant."""
        if isinstance(value, Traced):
            return value.expr
        if isinstance(value, bool | int | float):
            return E.constant(value)
        if isinstance(value, torch.Tensor) and value.dim() == 0:
            return E.constant(value.item())
        raise self.error(f"{what} must be a scalar expression, got {type(value).__name__}")

    def build_binary(self, op: str, lhs: Expr, rhs: Expr) -> Traced:
        if op in E.LOGIC and (lhs.kind != BOOL or rhs.kind != BOOL):
            raise self.error(f"'{'&' if op == 'and' else '|'}' applies to boolean expressions only")
        if op in ("floordiv", "mod"):
            divisor = E.const_value(rhs)
            if lhs.kind != INT or type(divisor) is not int or divisor <= 0:
                raise self.error(
                    f"'{'//' if op == 'floordiv' else '%'}' needs an integer expression and a "
                    "positive integer constant"
                )
        return Traced(self, E.binary(op, lhs, rhs))

    def gather(self, tensor: torch.Tensor, index) -> Traced:
        name = self.capture_names.get(id(tensor))
        if name is None:
            raise self.error("only tensors captured by the hook (globals or closure) can be indexed")
        indices = index if isinstance(index, tuple) else (index,)
        if len(indices) != tensor.dim():
            raise self.error(
                f"captured tensor '{name}' has {tensor.dim()} dimensions but is indexed "
                f"with {len(indices)}"
            )
        exprs = tuple(self.lift(i, f"an index of '{name}'") for i in indices)
        if any(i.kind != INT for i in exprs):
            raise self.error(f"captured tensor '{name}' must be indexed by integers")
        kind = FLOAT if tensor.is_floating_point() else (BOOL if tensor.dtype == torch.bool else INT)
        return Traced(self, E.gather(name, exprs, kind, self.user_line()))


def _binary(op: str, reflected: bool = False):
    def method(self: Traced, other) -> Traced:
        other_expr = self.tracer.lift(other, f"the operand of '{op}'")
        lhs, rhs = (other_expr, self.expr) if reflected else (self.expr, other_expr)
        return self.tracer.build_binary(op, lhs, rhs)

    return method


def _unary(op: str):
    def method(self: Traced) -> Traced:
        return Traced(self.tracer, E.unary(op, self.expr))

    return method


class Traced:
    """A traced scalar: Python operators and torch functions on it build Exprs."""

    def __init__(self, tracer: Tracer, expr: Expr):
        self.tracer = tracer
        self.expr = expr

    def _needs_value(self, *_):
        raise self.tracer.error(
            "data-dependent Python control flow in a hook: use torch.where instead of "
            "if/and/or/not on traced values"
        )

    __bool__ = __index__ = __int__ = __float__ = _needs_value

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv"), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __lt__, __le__ = _binary("lt"), _binary("le")
    __gt__, __ge__ = _binary("gt"), _binary("ge")
    __eq__, __ne__ = _binary("eq"), _binary("ne")
    __and__, __rand__ = _binary("and"), _binary("and", True)
    __or__, __ror__ = _binary("or"), _binary("or", True)
    __neg__ = _unary("neg")
    __abs__ = abs = _unary("abs")
    tanh, exp, exp2, log, sigmoid, sqrt = map(_unary, ("tanh", "exp", "exp2", "log", "sigmoid", "sqrt"))
    __hash__ = object.__hash__

    def __invert__(self) -> Traced:
        if self.expr.kind != BOOL:
            raise self.tracer.error("'~' applies to boolean expressions only")
        return Traced(self.tracer, E.unary("not", self.expr))

    def clamp(self, min=None, max=None) -> Traced:
        result = self
        if min is not None:
            result = _binary("max")(result, min)
        if max is not None:
            result = _binary("min")(result, max)
        return result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracer = next(a.tracer for a in _flatten(args, kwargs) if isinstance(a, Traced))
        if func is torch.Tensor.__getitem__:
            return tracer.gather(args[0], args[1])
        handler = _TORCH_FUNCTIONS.get(func)
        if handler is None:
            name = getattr(func, "__name__", repr(func))
            raise tracer.error(f"unsupported torch operation '{name}' in a hook")
        return handler(*args, **kwargs)


def _flatten(args, kwargs):
    for value in (*args, *kwargs.values()):
        if isinstance(value, tuple | list):
            yield from value
        else:
            yield value


def _where(condition, if_true, if_false) -> Traced:
    tracer = next(a.tracer for a in (condition, if_true, if_false) if isinstance(a, Traced))
    cond = tracer.lift(condition, "the condition of torch.where")
    if cond.kind != BOOL:
        raise tracer.error("the condition of torch.where must be boolean")
    return Traced(
        tracer,
        E.select(cond, tracer.lift(if_true, "a torch.where branch"), tracer.lift(if_false, "a torch.where branch")),
    )


def _method(name: str):
    return lambda value, *args, **kwargs: getattr(value, name)(*args, **kwargs)


_TORCH_FUNCTIONS: dict[Callable, Callable] = {
    torch.where: _where,
    torch.clamp: _method("clamp"),
    torch.Tensor.clamp: _method("clamp"),
    torch.minimum: _binary("min"),
    torch.maximum: _binary("max"),
    torch.logical_and: _binary("and"),
    torch.logical_or: _binary("or"),
    torch.logical_not: lambda value: ~value,
}
for _name in ("tanh", "exp", "exp2", "log", "sigmoid", "sqrt", "abs", "neg"):
    _TORCH_FUNCTIONS[getattr(torch, _name)] = _unary(_name)
    _TORCH_FUNCTIONS[getattr(torch.Tensor, _name)] = _unary(_name)
_TORCH_FUNCTIONS[torch.nn.functional.sigmoid] = _unary("sigmoid")

