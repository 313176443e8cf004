"""Recover score_mod, mask_mod and the normalization from an eager `attention(q, k, v)`.

The function is traced with torch.fx and its graph interpreted abstractly:
`q @ k^T` (k possibly `repeat_interleave`d for grouped-query heads) is the
raw score tile, and multiplying it by `q.shape[-1] ** -0.5` gives the scaled
score that score_mod receives. `torch.arange` over the score tile's last two
sizes gives q_idx and kv_idx; elementwise code on these is collected into a
hook, traced as hooks are. The tile must then go through softmax, sigmoid or
relu into `@ v`. Outermost `masked_fill(cond, -inf)` / `where(cond, x, -inf)`
become mask_mod; the rest is score_mod. Anything else is a located error.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import expr as E
from cubridge.frontends.expr import FLOAT, Expr
from cubridge.frontends.hooks import trace_hook

SCORE_ARGUMENTS = ("score", "b", "h", "q_idx", "kv_idx")


@dataclass(frozen=True)
class _Operand:
    """q, k, v, k transposed, or the raw (unscaled) score tile."""

    role: str


@dataclass(frozen=True)
class _Size:
    """A size of an operand: `head_dim`, `seqlen_q`, `seqlen_kv`, or another integer."""

    meaning: str


@dataclass(frozen=True, eq=False)
class _Shape:
    """`x.shape` of an operand or of score-shaped traced code."""

    of: object


@dataclass(frozen=True, eq=False)
class _Pointwise:
    """Score-shaped elementwise code: `compute` maps the hook arguments (0-d tensors,
    by name) to its value."""

    compute: Callable[[dict[str, torch.Tensor]], torch.Tensor]


@dataclass(frozen=True)
class _Probabilities:
    normalization: str
    score: _Pointwise


_SIZE_MEANINGS = {
    ("q", -1): "head_dim",
    ("k", -1): "head_dim",
    ("q", -2): "seqlen_q",
    ("scores", -2): "seqlen_q",
    ("k", -2): "seqlen_kv",
    ("v", -2): "seqlen_kv",
    ("scores", -1): "seqlen_kv",
}
# `P.to(q.dtype)` and the like: P is computed in the kernel's own precision
_DTYPE_CONVERSIONS = ("to", "type_as", "type", "float", "half", "bfloat16")
_RANK = 4  # q, k, v and the score tile are [B, H, S, D] / [B, H, SQ, SKV]
_NORMALIZATIONS = {
    torch.softmax: "softmax",
    torch.nn.functional.softmax: "softmax",
    "softmax": "softmax",
    torch.sigmoid: "sigmoid",
    "sigmoid": "sigmoid",
    torch.relu: "relu",
    torch.nn.functional.relu: "relu",
    "relu": "relu",
}


@dataclass(frozen=True)
class EagerHooks:
    score_expr: Expr | None
    mask_expr: Expr | None
    normalization: str


def hooks_from_attention(attention: Callable, path: str, captures: dict[str, torch.Tensor]) -> EagerHooks:
    """Trace `attention(q, k, v)` and split it into hooks; errors point at its definition."""
    where = f"{path}:{attention.__code__.co_firstlineno}"
    try:
        with _recording_creations():
            graph = torch.fx.symbolic_trace(attention).graph
    except Exception as error:  # fx reports untraceable Python in many ways
        raise CuBridgeError(f"cannot trace attention with torch.fx: {error}", where) from None
    return _Interpreter(path, captures, where).run(graph)


_CREATIONS = {"zeros": 0, "ones": 1, "full": None}  # torch functions making a tensor of given sizes: their fill


@contextlib.contextmanager
def _recording_creations():
    """While fx traces, `torch.zeros(L, S)` and the like with traced sizes become graph nodes (fx would call them
    with its proxies, which they refuse)."""
    originals = {name: getattr(torch, name) for name in _CREATIONS}

    def recorded(create: Callable) -> Callable:
        def create_or_record(*args, **kwargs):
            flat = [*args, *kwargs.values(), *(item for arg in args if isinstance(arg, tuple | list) for item in arg)]
            proxy = next((value for value in flat if isinstance(value, torch.fx.Proxy)), None)
            if proxy is None:
                return create(*args, **kwargs)
            return proxy.tracer.create_proxy("call_function", create, args, kwargs)

        return create_or_record

    for name, create in originals.items():
        setattr(torch, name, recorded(create))
    try:
        yield
    finally:
        for name, create in originals.items():
            setattr(torch, name, create)


def _pointwise(function: Callable, *args, **kwargs) -> _Pointwise:
    """`function` applied to the values of the arguments that are pointwise code."""

    def compute(env: dict[str, torch.Tensor]):
        def value(arg):
            return arg.compute(env) if isinstance(arg, _Pointwise) else arg

        return function(*map(value, args), **{key: value(arg) for key, arg in kwargs.items()})

    return _Pointwise(compute)


class _Interpreter:
    def __init__(self, path: str, captures: dict[str, torch.Tensor], where: str):
        self.path = path
        self.captures = captures
        self.where = where
        self.values: dict[torch.fx.Node, object] = {}

    def fail(self, message: str) -> CuBridgeError:
        return CuBridgeError(f"eager attention: {message}", self.where)

    def run(self, graph: torch.fx.Graph) -> EagerHooks:
        placeholders = iter(("q", "k", "v"))
        for node in graph.nodes:
            if node.op == "placeholder":
                self.values[node] = _Operand(next(placeholders, "extra"))
            elif node.op == "output":
                return self._result(self.values[node.args[0]])
            else:
                self.values[node] = self._evaluate(node)
        raise self.fail("the graph has no output")

    def _result(self, value) -> EagerHooks:
        if not isinstance(value, _Output):
            raise self.fail("the result is not P @ v for P = softmax/sigmoid/relu of the scores")
        compute = value.probabilities.score.compute

        def score_mod(*arguments):
            return compute(dict(zip(SCORE_ARGUMENTS, arguments)))

        traced = trace_hook(score_mod, SCORE_ARGUMENTS, self.path, self.captures)
        score, mask = _split_mask(traced)
        unmodified = score == E.argument("score", FLOAT)
        return EagerHooks(None if unmodified else score, mask, value.probabilities.normalization)

    def _evaluate(self, node: torch.fx.Node):
        args = torch.fx.node.map_arg(node.args, self.values.__getitem__)
        kwargs = torch.fx.node.map_arg(node.kwargs, self.values.__getitem__)
        target = node.target
        name = target if node.op == "call_method" else getattr(target, "__name__", str(target))
        if node.op == "call_method":
            receiver, *args = args
            return self._method(name, receiver, args, kwargs)
        if node.op != "call_function":
            raise self.fail(f"unsupported graph node '{node.op}'")
        return self._function(target, name, args, kwargs)

    def _method(self, name: str, receiver, args, kwargs):
        if isinstance(receiver, _Operand):
            return self._operand_method(name, receiver, args)
        if isinstance(receiver, _Pointwise):
            if name.endswith("_") and not name.startswith("_"):  # later uses would read the node before it
                raise self.fail(f"in-place '{name}' is not supported: use '{name[:-1]}' and its result")
            if name in ("tril", "triu"):
                return self._triangle(name, receiver, *args, **kwargs)
            if name == "size":  # the score tile's, as `.shape`
                return _size("scores", args[0]) if args else _Shape(receiver)
            if name in ("unsqueeze", "view", "reshape", "expand"):
                return receiver  # broadcasting only: the hook computes one element
            if name in _NORMALIZATIONS:
                return _Probabilities(_NORMALIZATIONS[name], receiver)
            return _pointwise(
                lambda value, *rest, **options: getattr(value, name)(*rest, **options), receiver, *args, **kwargs
            )
        if isinstance(receiver, _Probabilities) and name in _DTYPE_CONVERSIONS:
            return receiver
        raise self.fail(f"unsupported method '{name}'")

    def _operand_method(self, name: str, operand: _Operand, args):
        if name == "repeat_interleave" and operand.role in ("k", "v"):
            return operand
        if name == "transpose" and operand.role == "k":
            return _Operand("kT")
        if name == "size":
            return _size(operand.role, args[0]) if args else _Shape(operand)
        raise self.fail(f"unsupported method '{name}' on {operand.role}")

    def _function(self, target, name: str, args, kwargs):
        if target is getattr:
            operand, attribute = args
            if attribute == "mT" and _is(operand, _Operand("k")):
                return _Operand("kT")
            return _Shape(operand) if attribute == "shape" else None
        if target is operator.getitem:
            return self._getitem(*args)
        if target in (operator.matmul, torch.matmul):
            return self._matmul(*args)
        if target in _NORMALIZATIONS and isinstance(args[0], _Pointwise):
            return _Probabilities(_NORMALIZATIONS[target], args[0])
        if target is torch.arange:
            return self._arange(args[-1])
        if target in (getattr(torch, creation) for creation in _CREATIONS):
            return self._creation(name, args, kwargs)
        if any(_is(a, _Operand("scores")) for a in args):
            return self._scaled_score(target, args)
        if any(isinstance(a, _Size) for a in args):
            return self._size_arithmetic(target, args)
        if any(isinstance(a, _Operand | _Probabilities) for a in args):
            raise self.fail(f"unsupported operation '{name}' on the attention operands")
        if any(isinstance(a, _Pointwise) for a in (*args, *kwargs.values())):
            return _pointwise(target, *args, **kwargs)
        return target(*args, **kwargs)  # constants

    def _getitem(self, container, index):
        if isinstance(container, _Shape):
            shaped = container.of
            # elementwise code keeps the score tile's shape
            role = shaped.role if isinstance(shaped, _Operand) else "scores" if isinstance(shaped, _Pointwise) else "other"
            if isinstance(index, slice):  # `L, S = scores.shape[-2:]`
                return tuple(_size(role, d) for d in range(-_RANK, 0)[index])
            return _size(role, index)
        if isinstance(container, _Pointwise):  # [:, None] and friends only broadcast
            return container
        return container[index]

    def _matmul(self, lhs, rhs):
        if _is(lhs, _Operand("q")) and _is(rhs, _Operand("kT")):
            return _Operand("scores")
        if isinstance(lhs, _Probabilities) and _is(rhs, _Operand("v")):
            return _Output(lhs)
        raise self.fail("only q @ k^T and P @ v matrix products are supported")

    def _arange(self, size):
        meanings = {"seqlen_q": "q_idx", "seqlen_kv": "kv_idx"}
        if not isinstance(size, _Size) or size.meaning not in meanings:
            raise self.fail("torch.arange must run over the score tile's rows or columns")
        argument = meanings[size.meaning]
        return _Pointwise(lambda env: env[argument])

    def _creation(self, name: str, args, kwargs) -> _Pointwise:
        """torch.zeros / ones / full of the score tile's shape [..., SQ, SKV]: one element of it, a constant."""
        sizes = args[0] if isinstance(args[0], tuple | list) else args if name != "full" else ()
        if [getattr(size, "meaning", None) for size in sizes[-2:]] != ["seqlen_q", "seqlen_kv"]:
            raise self.fail(f"torch.{name} must make a tensor of the score tile's shape [..., SQ, SKV]")
        fill = _CREATIONS[name] if name != "full" else (args[1] if len(args) > 1 else kwargs["fill_value"])
        dtype = kwargs.get("dtype")  # None where it is traced (`q.dtype`): the default, as for the scores
        if name != "full":
            dtype = dtype or torch.get_default_dtype()
        return _Pointwise(lambda env: torch.full((), fill, dtype=dtype))

    def _triangle(self, name: str, receiver: _Pointwise, diagonal: int = 0) -> _Pointwise:
        """x.tril(d) keeps the elements with kv_idx - q_idx <= d, x.triu(d) those with kv_idx - q_idx >= d; the
        others are 0."""
        def compute(env: dict[str, torch.Tensor]):
            offset = env["kv_idx"] - env["q_idx"]
            kept = offset <= diagonal if name == "tril" else offset >= diagonal
            value = receiver.compute(env)
            return torch.where(kept, value, torch.zeros((), dtype=value.dtype))

        return _Pointwise(compute)

    def _size_arithmetic(self, target, args):
        """Track the softmax scale 1 / sqrt(head_dim) and its inverse (`** 0.5` or `math.sqrt`); other sizes are
        opaque."""
        if target is operator.pow and _is(args[0], _Size("head_dim")) and args[1] in (0.5, -0.5):
            return _Size("scale" if args[1] < 0 else "inverse_scale")
        if target is math.sqrt and _is(args[0], _Size("head_dim")):
            return _Size("inverse_scale")
        if target is operator.truediv and args[0] == 1 and _is(args[1], _Size("inverse_scale")):
            return _Size("scale")
        return _Size("other")

    def _scaled_score(self, target, args):
        """The raw score tile times the softmax scale is the `score` hook argument."""
        other = args[1] if _is(args[0], _Operand("scores")) else args[0]
        if (target is operator.mul and _is(other, _Size("scale"))) or (
            target is operator.truediv and _is(args[1], _Size("inverse_scale"))
        ):
            return _Pointwise(lambda env: env["score"])
        raise self.fail("the scores must be multiplied by q.shape[-1] ** -0.5 before anything else")


def _size(role: str, dimension: int) -> _Size:
    """Size `dimension` (from either end) of a [B, H, S, D] operand or of the score tile."""
    return _Size(_SIZE_MEANINGS.get((role, dimension - _RANK if dimension >= 0 else dimension), "other"))


def _is(value, expected) -> bool:
    """Equality for abstract values (never `==` on traced values, which builds an Expr)."""
    return type(value) is type(expected) and value == expected


@dataclass(frozen=True)
class _Output:
    probabilities: _Probabilities


def _split_mask(score: Expr) -> tuple[Expr, Expr | None]:
    """Peel outermost selects against -inf, and additions of a bias that is 0 or -inf (`s + attn_bias`, the bias
    made by masked_fill or triu), into a mask (the kept side's condition)."""
    keeps: list[Expr] = []
    while (peeled := _peel_masking(score)) is not None:
        keep, score = peeled
        keeps.append(keep)
    mask = None
    for keep in keeps:
        mask = keep if mask is None else E.binary("and", mask, keep)
    return score, mask


def _peel_masking(score: Expr) -> tuple[Expr, Expr] | None:
    """(the condition that keeps a score, the score kept) where `score` selects between it and -inf or adds a
    bias that is 0 where kept and -inf elsewhere; else None."""
    if score.op == "select":
        condition, if_true, if_false = score.args
        if E.const_value(if_false) == -math.inf:
            return condition, if_true
        if E.const_value(if_true) == -math.inf:
            return E.unary("not", condition), if_false
        return None
    if score.op != "add":
        return None
    for bias, kept in (score.args, score.args[::-1]):
        if bias.op == "select" and {E.const_value(arm) for arm in bias.args[1:]} == {0.0, -math.inf}:
            condition, if_true, _ = bias.args
            return (condition if E.const_value(if_true) == 0.0 else E.unary("not", condition)), kept
    return None
