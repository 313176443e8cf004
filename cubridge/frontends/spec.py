"""Attention variant specs: FlexAttention-style hooks in a Python file.

A spec file defines `score_mod(score, b, h, q_idx, kv_idx)` and/or
`mask_mod(b, h, q_idx, kv_idx)` with FlexAttention's signatures and meaning,
optionally `normalization` ("softmax", "sigmoid" or "relu") and an eager
`reference(q, k, v)`. `load_spec` runs the file, traces the hooks with torch
into `Expr`s (`hooks`) and finds the tensors they capture; see docs/specs.md.
`spec_from_hooks` does the same for hooks passed as Python callables (as
`cubridge.attention` receives them).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import os
import marshal
import pickle
import re
import site
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.files import write_atomically
from cubridge.runtime.compiler import cache_dir
from cubridge.frontends.expr import BOOL, FLOAT, INT, Expr, argument, evaluate
from cubridge.frontends.ranges import (
    INT32_MAX,
    INT32_MIN,
    INTEGER_DIVISIONS,
    WIDENING_OPS,
    Excess,
    Problem,
    excess,
    intervals,
    takes_zero,
)
from cubridge.reference import attention_reference, per_element
from cubridge.frontends.eager import hooks_from_attention
from cubridge.frontends.hooks import (
    captured_tensors,
    definition,
    failure,
    global_names,
    hook_code,
    reachable_functions,
    read_attributes,
    referenced_values,
    trace_hook,
)

NORMALIZATIONS = ("softmax", "sigmoid", "relu")
SCORE_MOD_ARGS = ("score", "b", "h", "q_idx", "kv_idx")
MASK_MOD_ARGS = ("b", "h", "q_idx", "kv_idx")
_KIND_NAMES = {"int": "an integer", "float": "a float"}


@dataclass(frozen=True)
class AttentionSpec:
    """A loaded spec: its hooks, their traced expressions and captured tensors."""

    name: str
    path: str
    score_mod: Callable | None
    mask_mod: Callable | None
    normalization: str
    captures: dict[str, torch.Tensor]
    score_expr: Expr | None
    mask_expr: Expr | None
    user_reference: Callable | None
    hooks_broadcast: bool = False  # the hooks take broadcastable index grids (the traced ones): no vmap

    def identity(self) -> str:
        """What a variant built from this spec depends on besides the captured tensors' values (which are kernel
        arguments): the traced hooks with the spec lines they came from, the normalization, and the captured
        tensors' dtypes and shapes."""
        shapes = sorted((name, str(t.dtype), tuple(t.shape)) for name, t in self.captures.items())
        return repr((self.score_expr, self.mask_expr, self.normalization, shapes))

    @torch.no_grad()  # captured tensors may be parameters that require grad
    def reference(self, q, k, v, scale: float) -> torch.Tensor:
        """Ground truth output, float64 [B, HQ, SQ, D]: `cubridge.reference.attention_reference` in float64
        (fully masked rows are 0), or the spec's own eager `reference`."""
        q, k, v = (torch.as_tensor(t).double() for t in (q, k, v))
        if self.user_reference is not None:
            takes_scale = len(inspect.signature(self.user_reference).parameters) == 4
            extra = (scale,) if takes_scale else ()
            try:
                return torch.as_tensor(self.user_reference(q, k, v, *extra)).double()
            except Exception as error:  # the spec's own code, on float64 inputs: one located line
                name = self.user_reference.__name__
                raise failure(f"running {name}", error, self.path, definition(self.user_reference)) from None
        return self._attention(q, k, v, scale, return_lse=False)

    @torch.no_grad()
    def reference_lse(self, q, k, v, scale: float) -> torch.Tensor | None:
        """Natural-log LSE, float64 [B, HQ, SQ], -inf for fully masked rows; None unless softmax."""
        if self.normalization != "softmax":
            return None
        q, k, v = (torch.as_tensor(t).double() for t in (q, k, v))
        return self._attention(q, k, v, scale, return_lse=True)[1]

    def _attention(self, q, k, v, scale: float, return_lse: bool):
        return attention_reference(q, k, v, self.score_mod, self.mask_mod, scale=scale,
                                   normalization=self.normalization, compute_dtype=torch.float64,
                                   return_lse=return_lse, broadcast_hooks=self.hooks_broadcast)

    def elementwise_hooks(self) -> tuple:
        """(score_mod, mask_mod) on 1-D b, h, q_idx, kv_idx vectors (and a [B, H, SQ, SKV] score): each element
        as FlexAttention applies hooks, vmapped; traced hooks (`hooks_broadcast`) run once on index grids
        instead. None for an absent hook."""
        def grids(indices):
            return [index.view([-1 if axis == dim else 1 for axis in range(4)]) for dim, index in enumerate(indices)]

        def wrap(hook, score_first: bool):
            if hook is None:
                return None
            if not self.hooks_broadcast:
                return per_element(hook, score_first)
            if score_first:
                return lambda score, *indices: torch.as_tensor(hook(score, *grids(indices))).expand_as(score)
            return lambda *indices: torch.as_tensor(hook(*grids(indices)))

        return wrap(self.score_mod, True), wrap(self.mask_mod, False)

    def broadcast_hooks(self, device, captures: dict[str, torch.Tensor] | None = None) -> tuple:
        """(score_mod, mask_mod) evaluating the traced hooks on broadcastable index grids, reading `captures`
        (default: the spec's) on `device`; None for an absent hook."""
        env = {name: tensor.to(device) for name, tensor in (captures or self.captures).items()}

        def hook(expr: Expr | None, arguments: tuple[str, ...]):
            if expr is None:
                return None
            return lambda *values: evaluate(expr, env | dict(zip(arguments, values)))

        return hook(self.score_expr, SCORE_MOD_ARGS), hook(self.mask_expr, MASK_MOD_ARGS)

    def with_traced_hooks(self, device="cpu") -> AttentionSpec:
        """A copy whose hooks are the traced expressions over copies of the captured tensors on `device`:
        the same variant, independent of where (and with which values) the original hooks' tensors live."""
        captures = {name: tensor.detach().to(device) for name, tensor in self.captures.items()}
        score_mod, mask_mod = self.broadcast_hooks(device, captures)
        return replace(self, captures=captures, score_mod=score_mod, mask_mod=mask_mod, hooks_broadcast=True)

    def mask_on(self, device) -> Callable:
        """mask_mod, evaluated from the traced mask with the captured tensors on `device`
        (a hook indexing a CPU tensor with GPU indices would fail)."""
        return self.broadcast_hooks(device)[1]

    def check_capture_bounds(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device=None) -> None:
        """Every captured-tensor read of the hooks stays inside its tensor for these shapes (evaluated where it
        must be on `device`, default the captured tensors')."""
        self._check_reads(self._ranges(q_shape, kv_shape, device), q_shape, kv_shape)

    def check_integer_range(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device=None) -> None:
        """Every integer a kernel computes from the hooks fits the 32-bit `int` the lowering gives it, for these
        shapes, and so does every value of a captured integer tensor (the kernel reads an int32 copy): the
        executor faults on such values at the shapes it runs, a launch runs larger ones."""
        self._check_integers(self._ranges(q_shape, kv_shape, device), q_shape, kv_shape)

    def check_launch_shape(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device=None) -> None:
        """`check_divisors`, `check_capture_bounds` and `check_integer_range` on one evaluation of the hooks'
        ranges (each table's least and greatest value taken once): what a launch plan checks."""
        ranges = self._ranges(q_shape, kv_shape, device)
        self._check_divisors(ranges, q_shape, kv_shape)
        self._check_reads(ranges, q_shape, kv_shape)
        self._check_integers(ranges, q_shape, kv_shape)

    def check_evaluable(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device=None) -> None:
        """`check_divisors` and `check_capture_bounds` on one evaluation of the hooks' ranges: what evaluating the
        hooks on a shape's index grid needs."""
        ranges = self._ranges(q_shape, kv_shape, device)
        self._check_divisors(ranges, q_shape, kv_shape)
        self._check_reads(ranges, q_shape, kv_shape)

    def check_divisors(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device=None) -> None:
        """No integer division or remainder of the hooks divides by zero for these shapes (torch refuses it on
        the CPU; on the GPU the quotient is meaningless, whether or not a `torch.where` discards it): checked
        before the hooks are evaluated for a shape."""
        self._check_divisors(self._ranges(q_shape, kv_shape, device), q_shape, kv_shape)

    def _ranges(self, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], device) -> tuple[Problem, dict]:
        problem = Problem((*q_shape[:3], kv_shape[2]), self.captures, device)
        return problem, intervals((self.score_expr, self.mask_expr), problem)

    def _check_reads(self, ranges: tuple[Problem, dict], q_shape: tuple[int, ...], kv_shape: tuple[int, ...]) -> None:
        problem, found = ranges
        for read in _gathers(self.score_expr, self.mask_expr):
            name, indices = read.args
            extents = self.captures[name].shape
            for dim, index in enumerate(indices):
                past = excess(index, found[index], problem, 0, extents[dim] - 1)
                if past is not None:
                    raise CuBridgeError(
                        f"captured tensor '{name}' has {extents[dim]} entries in dimension {dim} but the hook "
                        f"{_reaches(past, 'reads index', 'may read index')} for q {list(q_shape)}, "
                        f"k {list(kv_shape)}",
                        f"{self.path}:{read.line or 1}",
                    )

    def _check_divisors(self, ranges: tuple[Problem, dict], q_shape: tuple[int, ...],
                        kv_shape: tuple[int, ...]) -> None:
        problem, found = ranges
        for node in found:  # operands before the ops that use them: an inner division is reported first
            if node.kind != INT or node.op not in INTEGER_DIVISIONS:
                continue
            zero = takes_zero(node.args[1], found[node.args[1]], problem)
            if zero is not None:
                raise CuBridgeError(
                    f"integer division by zero: the divisor of a {INTEGER_DIVISIONS[node.op]} in the hook "
                    f"{_reaches(zero, 'is', 'may be')} for q {list(q_shape)}, k {list(kv_shape)} (keep it nonzero, "
                    "e.g. with torch.clamp: a torch.where does not stop the division)",
                    f"{self.path}:{node.line or 1}",
                )

    def _check_integers(self, ranges: tuple[Problem, dict], q_shape: tuple[int, ...],
                        kv_shape: tuple[int, ...]) -> None:
        problem, found = ranges
        for name, tensor in self.captures.items():
            if tensor.is_floating_point() or tensor.dtype == torch.bool:
                continue
            low, high = problem.table(name)
            if low < INT32_MIN or high > INT32_MAX:
                raise CuBridgeError(f"captured tensor '{name}' holds {low if low < INT32_MIN else high}, past the "
                                    "32-bit int the kernel reads integer tensors as", self.path)
        for node, interval in found.items():
            if node.kind != INT or node.op not in WIDENING_OPS:
                continue
            past = excess(node, interval, problem, INT32_MIN, INT32_MAX)
            if past is not None:
                raise CuBridgeError(
                    f"integer overflow: a {WIDENING_OPS[node.op]} in the hook {_reaches(past, 'reaches', 'may reach')} "
                    f"for q {list(q_shape)}, k {list(kv_shape)}, past the 32-bit int the kernel computes hook "
                    "integers in",
                    f"{self.path}:{node.line or 1}",
                )


def spec_from_hooks(score_mod: Callable | None = None, mask_mod: Callable | None = None,
                    normalization: str = "softmax", name: str | None = None) -> AttentionSpec:
    """Check and trace hooks given as Python callables, as `load_spec` does a spec file's (with the same trace
    cache, keyed by the code the hooks can run, the Python values they read and their captured tensors'
    kinds and shapes). Errors are located at the hook's file and line. `name` (default: from the hooks'
    names) names the variant's entry points."""
    if normalization not in NORMALIZATIONS:
        raise CuBridgeError(f"normalization: expected one of {', '.join(NORMALIZATIONS)}, got {normalization!r}")
    if score_mod is None and mask_mod is None:
        raise CuBridgeError("a variant needs score_mod, mask_mod or both")
    roles = ((score_mod, "score_mod"), (mask_mod, "mask_mod"))
    default_name = "_".join(getattr(hook, "__name__", role) for hook, role in roles if hook is not None)
    score_mod, mask_mod = _unbound(score_mod), _unbound(mask_mod)
    pairs = ((score_mod, SCORE_MOD_ARGS, "score_mod"), (mask_mod, MASK_MOD_ARGS, "mask_mod"))
    bound: dict[str, torch.Tensor] = {}
    for hook, arguments, role in pairs:
        if hook is None:
            continue
        if not _is_python_function(hook):
            raise _not_a_function(hook, role, arguments)
        _check_arity(hook, arguments)
        bound |= captured_tensors(hook)
    traced = _traces(hooks_trace_key(score_mod, mask_mod, bound), [(hook, arguments) for hook, arguments, _ in pairs],
                     lambda hook: hook_code(hook).co_filename, bound)
    score_expr, mask_expr = traced
    _check_results(score_mod, score_expr, mask_mod, mask_expr)
    score_expr = _modifying(score_expr)
    read = set().union(*(expr.leaves() for expr in traced if expr is not None))
    return AttentionSpec(
        name=name or (re.sub(r"\W+", "_", default_name).strip("_") or "variant"),
        path=hook_code(score_mod or mask_mod).co_filename,
        score_mod=score_mod,
        mask_mod=mask_mod,
        normalization=normalization,
        captures={name: tensor for name, tensor in bound.items() if name in read},
        score_expr=score_expr,
        mask_expr=mask_expr,
        user_reference=None,
    )


def _unbound(hook: Callable | None) -> Callable | None:
    """A bound method (`layer.mask`), or an object called as a function (`Window(64)`: its `__call__`), as its
    function with `self` bound by a functools.partial, which the tracer and the trace key follow (the attributes
    of `self` that the method reads are values of the key)."""
    if not isinstance(hook, types.FunctionType | types.MethodType | functools.partial) and isinstance(
            getattr(hook, "__call__", None), types.MethodType):
        hook = hook.__call__
    if isinstance(hook, types.MethodType):
        return functools.partial(hook.__func__, hook.__self__)
    return hook


def _is_python_function(hook: Callable) -> bool:
    """Whether the tracer can follow `hook` (after `_unbound`): a Python function, or a partial of one."""
    while isinstance(hook, functools.partial):
        hook = hook.func
    return isinstance(hook, types.FunctionType)


def _not_a_function(hook, role: str, arguments: tuple[str, ...], where: str | None = None) -> CuBridgeError:
    return CuBridgeError(f"{role} must be a function {role}({', '.join(arguments)}), got {type(hook).__name__}", where)


def hooks_trace_key(score_mod: Callable | None, mask_mod: Callable | None, bound: dict[str, torch.Tensor]) -> str:
    """Everything traced hooks given as callables depend on: the code of every function they can reach
    (bytecode, constants, names and lines), the Python values those functions read and the arguments of a
    functools.partial hook (a bound method's `self`: `_unbound`), by `_value_fingerprint`, their captured
    tensors' kinds and shapes (and the values of 0-d ones, which become constants), and the tracer."""
    digest = hashlib.sha256(_tracer_version().encode())
    for role, hook in (("score_mod", score_mod), ("mask_mod", mask_mod)):
        digest.update(f"\0{role}".encode())
        if hook is None:
            continue
        hook = _unbound(hook)
        if isinstance(hook, functools.partial):  # its arguments (partials inside a closure: the values below)
            digest.update(b"\0partial\0" + _value_fingerprint(hook, frozenset()))
        for function in reachable_functions(hook):
            digest.update(b"\0code\0" + marshal.dumps(function.__code__))
            names = frozenset(global_names(function.__code__))
            for name, value in referenced_values(function):
                digest.update(f"\0{name}=".encode() + _value_fingerprint(value, names))
    _digest_tensors(digest, bound)
    return digest.hexdigest()


def _value_fingerprint(value, names: frozenset[str], seen: frozenset[int] = frozenset()) -> bytes:
    """What a hook's result can depend on in a value it reads, `names` being the names its code reads (tensors it
    captures are fingerprinted apart): scalars and dtypes by value; containers, functools.partial objects and bound
    methods by their items and arguments; objects, classes and modules by the attributes of theirs the code names
    (`read_attributes`), project modules and functions by their files too, anything else by its type and name."""
    if isinstance(value, bool | int | float | str | type(None) | torch.dtype):
        return repr(value).encode()
    if id(value) in seen:
        return b"<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, tuple | list):
        return (type(value).__name__.encode() + b"("
                + b",".join(_value_fingerprint(item, names, seen) for item in value) + b")")
    if isinstance(value, dict):
        items = sorted((repr(key), _value_fingerprint(item, names, seen)) for key, item in value.items())
        return b"dict(" + b",".join(key.encode() + b":" + item for key, item in items) + b")"
    if isinstance(value, types.MethodType):
        value = _unbound(value)
    if isinstance(value, functools.partial):
        func = value.func
        func_names = frozenset(global_names(func.__code__)) if isinstance(func, types.FunctionType) else names
        return (b"partial(" + _value_fingerprint(func, names, seen) + b";"
                + _value_fingerprint(value.args, func_names, seen) + b";"
                + _value_fingerprint(value.keywords, func_names, seen) + b")")
    if isinstance(value, torch.Tensor):  # inside a container or an object: not a capture the tracer takes
        return f"tensor({value.dtype},{tuple(value.shape)})".encode()
    source = value if isinstance(value, types.ModuleType) else sys.modules.get(getattr(value, "__module__", ""))
    file = getattr(source, "__file__", None)
    roots = _installation_roots()
    if file and file.endswith(".py") and not os.path.abspath(file).startswith(roots):
        identity = file.encode() + b"\0" + Path(file).read_bytes()
    else:
        identity = type(value).__qualname__.encode() + b":" + getattr(value, "__qualname__", "").encode()
    attributes = [name.encode() + b"=" + _value_fingerprint(attribute, names, seen)
                  for name, attribute in read_attributes(value, names)]
    return identity + (b"{" + b",".join(attributes) + b"}" if attributes else b"")


def _check_results(score_mod, score_expr: Expr | None, mask_mod, mask_expr: Expr | None) -> None:
    if score_expr is not None and score_expr.kind == BOOL:
        raise CuBridgeError("score_mod must return a score, not a boolean", definition(score_mod))
    if mask_expr is not None and mask_expr.kind != BOOL:
        raise CuBridgeError(
            f"mask_mod must return a boolean, but returns {_KIND_NAMES[mask_expr.kind]} expression",
            definition(mask_mod),
        )


def _modifying(score_expr: Expr | None) -> Expr | None:
    """The traced score_mod, or None where it returns the score unchanged (FlexAttention's `noop` score_mod): the
    kernel then keeps its own scaling, as without a score_mod (the transfer had nothing to put in its place)."""
    return None if score_expr == argument("score", FLOAT) else score_expr


def load_spec(path: str) -> AttentionSpec:
    """Load, check and trace the spec file at `path`."""
    path = os.path.abspath(path)
    module, source = _run_spec_file(path)
    score_mod = getattr(module, "score_mod", None)
    mask_mod = getattr(module, "mask_mod", None)
    attention = getattr(module, "attention", None)
    if score_mod is None and mask_mod is None and attention is not None:
        return _from_eager_attention(path, module, attention)
    if attention is not None:
        raise CuBridgeError("a spec defines hooks (score_mod, mask_mod) or an eager attention, not both: its "
                            "attention would be ignored (a spec's own ground truth is `reference`)",
                            definition(attention))
    if score_mod is None and mask_mod is None:
        raise CuBridgeError(
            "a spec defines score_mod, mask_mod or both (or an eager attention); this one has none",
            f"{path}:1",
        )
    normalization = getattr(module, "normalization", "softmax")
    if normalization not in NORMALIZATIONS:
        raise CuBridgeError(
            f"unknown normalization {normalization!r}; expected one of {', '.join(NORMALIZATIONS)}",
            f"{path}:{_assignment_line(path, 'normalization')}",
        )
    score_mod, mask_mod = _unbound(score_mod), _unbound(mask_mod)
    roles = ((score_mod, SCORE_MOD_ARGS, "score_mod"), (mask_mod, MASK_MOD_ARGS, "mask_mod"))
    bound: dict[str, torch.Tensor] = {}
    for hook, arguments, role in roles:
        if hook is None:
            continue
        if not _is_python_function(hook):
            raise _not_a_function(hook, role, arguments, f"{path}:{_assignment_line(path, role)}")
        _check_arity(hook, arguments)
        bound |= captured_tensors(hook)
    score_expr, mask_expr = _traces(_trace_key(path, source, module, score_mod, mask_mod, bound),
                                    [(score_mod, SCORE_MOD_ARGS), (mask_mod, MASK_MOD_ARGS)], lambda hook: path, bound)
    read = set().union(*(expr.leaves() for expr in (score_expr, mask_expr) if expr is not None))
    captures = {name: tensor for name, tensor in bound.items() if name in read}
    _check_results(score_mod, score_expr, mask_mod, mask_expr)
    score_expr = _modifying(score_expr)
    return AttentionSpec(
        name=os.path.splitext(os.path.basename(path))[0],
        path=path,
        score_mod=score_mod,
        mask_mod=mask_mod,
        normalization=normalization,
        captures=captures,
        score_expr=score_expr,
        mask_expr=mask_expr,
        user_reference=getattr(module, "reference", None),
    )


def _local_sources(path: str, module: types.ModuleType) -> list[str]:
    """The spec file and the project files its globals come from (modules, functions and classes defined
    outside the Python installation): the code its hooks can run."""
    roots = _installation_roots()
    files = {path}
    for value in vars(module).values():
        source = value if isinstance(value, types.ModuleType) else sys.modules.get(getattr(value, "__module__", ""))
        file = getattr(source, "__file__", None)
        if file and file.endswith(".py") and not os.path.abspath(file).startswith(roots):
            files.add(os.path.abspath(file))
    return sorted(files)


@functools.cache
def _installation_roots() -> tuple[str, ...]:
    """Where installed Python code lives: files under these are versioned with their packages, not hashed."""
    return tuple({sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages()})


@functools.cache
def _tracer_version() -> str:
    """The frontend's own code and torch's version: a traced hook depends on both."""
    digest = hashlib.sha256(torch.__version__.encode())
    for file in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _trace_key(path: str, source: bytes, module: types.ModuleType, score_mod: Callable | None,
               mask_mod: Callable | None, bound: dict[str, torch.Tensor]) -> str:
    """Everything a traced hook depends on: the code it can run (the spec's `source`, the text that ran, and the
    project files its globals come from) and what `hooks_trace_key` follows of its hooks (the values they read,
    computed when the spec ran: a configuration it loads, an environment variable, and the kinds and ranks of
    the tensors they can read)."""
    digest = hashlib.sha256(hooks_trace_key(score_mod, mask_mod, bound).encode())
    for file in _local_sources(path, module):
        text = source if file == path else Path(file).read_bytes()
        digest.update(b"\0file\0" + file.encode() + b"\0" + text)
    return digest.hexdigest()


def _digest_tensors(digest, bound: dict[str, torch.Tensor]) -> None:
    """Captured tensors' names, dtypes and shapes, and the values of 0-d ones (which become constants)."""
    for name, tensor in sorted(bound.items()):
        value = repr(tensor.item()) if tensor.dim() == 0 else ""
        digest.update(f"\0{name}:{tensor.dtype}:{tuple(tensor.shape)}:{value}".encode())


def _trace_cache() -> Path:
    return cache_dir() / "hooks"


# This process's traced hooks by trace key: a spec loaded again in a process neither traces nor reads the disk
# cache (a cached build's time, issue 14). The traces are immutable Exprs, shared by the specs that load them.
_TRACES: dict[str, tuple] = {}
_TRACES_LIMIT = 256


def _traces(key: str, hooks: list[tuple[Callable | None, tuple[str, ...]]], file_of: Callable[[Callable], str],
            bound: dict[str, torch.Tensor]):
    """The (score, mask) Exprs under `key`: an earlier load's, else traced from `hooks` ((hook or None, its
    arguments) each; `file_of(hook)` names the file diagnostics point into) and kept."""
    traced = _cached_traces(key)
    if traced is None:
        traced = tuple(trace_hook(hook, arguments, file_of(hook), bound) if hook is not None else None
                       for hook, arguments in hooks)
        _store_traces(key, traced)
    return traced


def _cached_traces(key: str):
    """The traced (score, mask) Exprs of an earlier load with the same key (this process's, else the disk
    cache's), or None. Tracing imports torch's compiler stack (about a second per process): both tools of a
    pipeline load the same spec."""
    traced = _TRACES.get(key)
    if traced is not None:
        return traced
    try:
        with open(_trace_cache() / f"{key}.pickle", "rb") as stream:
            traced = pickle.load(stream)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
        return None
    _remember_traces(key, traced)
    return traced


def _store_traces(key: str, traced) -> None:
    """Kept in this process, and written to disk whole or not at all; an unwritable cache only costs the next
    process's load a trace."""
    _remember_traces(key, traced)
    try:
        write_atomically(_trace_cache() / f"{key}.pickle", pickle.dumps(traced), make_directories=True)
    except OSError:
        return


def _remember_traces(key: str, traced) -> None:
    if len(_TRACES) >= _TRACES_LIMIT:
        _TRACES.clear()
    _TRACES[key] = traced


def _from_eager_attention(path: str, module: types.ModuleType, attention: Callable) -> AttentionSpec:
    """A spec whose hooks are recovered from `attention(q, k, v)`, its own ground truth."""
    _check_arity(attention, ("q", "k", "v"))
    captures = captured_tensors(attention)
    hooks = hooks_from_attention(attention, path, captures)
    return AttentionSpec(
        name=os.path.splitext(os.path.basename(path))[0],
        path=path,
        score_mod=_hook_of(hooks.score_expr, SCORE_MOD_ARGS, captures),
        mask_mod=_hook_of(hooks.mask_expr, MASK_MOD_ARGS, captures),
        normalization=hooks.normalization,
        captures=captures,
        score_expr=hooks.score_expr,
        mask_expr=hooks.mask_expr,
        user_reference=getattr(module, "reference", attention),
    )


def _hook_of(expr: Expr | None, arguments: tuple[str, ...], captures: dict[str, torch.Tensor]):
    """An eager hook computing `expr` on tensors (for references and block lists)."""
    if expr is None:
        return None
    return lambda *values: evaluate(expr, dict(zip(arguments, map(torch.as_tensor, values))) | captures)


def _run_spec_file(path: str) -> tuple[types.ModuleType, bytes]:
    """The spec file run as a fresh module (every load runs it: what it captures may come from elsewhere), its
    code compiled once per process and file text; and that text."""
    if not os.path.isfile(path):
        raise CuBridgeError("cannot read spec: no such file", path)
    try:
        source = Path(path).read_bytes()
    except OSError as error:
        raise CuBridgeError(f"cannot read spec: {error.strerror}", path) from None
    name = "cubridge_spec_" + os.path.splitext(os.path.basename(path))[0]
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))
    # registered like any imported module: torch.compile (FlexAttention) looks hooks' modules up by name
    sys.modules[name] = module
    try:
        exec(_spec_code(path, source), vars(module))
    except SyntaxError as error:
        raise CuBridgeError(f"syntax error in spec: {error.msg}", f"{path}:{error.lineno}") from None
    except Exception as error:  # the spec is user code: any failure is located in it
        raise failure("importing the spec", error, path, f"{path}:1") from None
    return module, source


@functools.lru_cache(maxsize=64)
def _spec_code(path: str, source: bytes) -> types.CodeType:
    """The spec file's module code (a SyntaxError where it has one), compiled once per path and text."""
    return compile(source, path, "exec", dont_inherit=True)


def _check_arity(hook: Callable, arguments: tuple[str, ...]) -> None:
    """The hook can be called with `arguments` (parameters with defaults may follow)."""
    signature = inspect.signature(hook)
    try:
        signature.bind(*arguments)
    except TypeError:
        name = getattr(hook, "__name__", "the hook")
        raise CuBridgeError(
            f"{name} takes ({', '.join(arguments)}) but is defined with "
            f"{len(signature.parameters)} parameter(s)",
            definition(hook),
        ) from None


def _assignment_line(path: str, variable: str) -> int:
    """The line of the module-level assignment to `variable` that takes effect (the last)."""
    with open(path, encoding="utf-8") as stream:
        tree = ast.parse(stream.read())
    lines = [
        node.lineno
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets)
    ]
    return lines[-1] if lines else 1


def _reaches(past: Excess, verb: str, bound_verb: str) -> str:
    if past.witnessed:
        return f"{verb} {past.value}"
    return (f"{bound_verb} {past.value} (a bound of interval arithmetic: the index grid is too large to "
            "evaluate)")


def _gathers(*exprs: Expr | None) -> list[Expr]:
    found: dict[Expr, None] = {}

    def visit(node: Expr) -> None:
        if node.op == "gather":
            found[node] = None
            for index in node.args[1]:
                visit(index)
            return
        for arg in node.args:
            if isinstance(arg, Expr):
                visit(arg)

    for expr in exprs:
        if expr is not None:
            visit(expr)
    return list(found)
