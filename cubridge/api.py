"""`cubridge.attention`: FlexAttention's `flex_attention`, with kernels CuBridge builds from the hooks.

    from cubridge import attention as flex_attention   # the one changed line of a FlexAttention program

The arguments are flex_attention's, in its order (`kernel_options`, the tuning of FlexAttention's own
kernels, is accepted and does not apply; `return_aux=AuxRequest(lse=True)` gives an `AuxOutput`);
`mask_mod=` and `normalization=` ("softmax", "sigmoid", "relu") are keyword-only extras. A `BlockMask`
contributes its `mask_mod`, which is what CuBridge compiles; one without a mask_mod (`BlockMask.from_kv_blocks`:
noop_mask) contributes a mask_mod that keeps the keys of its listed blocks, reading a table made from its lists
(eager calls; its lists are re-read when they change).

**How a call runs.** A variant is identified by its traced hooks (`spec_from_hooks`: the code the hooks can
run, the Python values they read, their captured tensors' kinds and shapes) and the normalization. Its first
call traces the hooks (cached on disk), transfers them onto the reference program of the GPU's architecture
(sm90 on Hopper, sm80 on Ampere and newer), verifies the result in the CPU executor on one shape (a
quick check, recorded on disk; `cubridge build` runs the full one), lowers it to CUDA and compiles it with
nvcc (cubins cached on disk) once per (dtype, head dim). Steps longer than a second say so on stderr. Later
calls find the variant in memory, bound to the hook objects: re-reading the captured tensors and comparing
the Python values the hooks read costs microseconds. A call repeated with the same hooks, BlockMask, scale and
flags on inputs of the same layout (shapes, strides, dtype, device) runs bound to the first one's launch plan,
without the argument checks. Captured tensors' values and sequence lengths are arguments, never part of the
key: new document boundaries do not recompile.

**Block lists.** A mask that the symbolic analysis cannot bound (it reads captured data, or b and h) runs
over FlexAttention-style block lists, built on the GPU from the mask_mod and cached per captured tensors and
shape. The Hopper kernel also takes the mask's keep() bits in the order of its partial tiles, made from the same
materialized mask, so it always builds its own lists. The sm80 kernel uses a given BlockMask's lists when its
BLOCK_SIZE equals its tiles (128 x 64), they cover this problem's sequence lengths, and none was built with
separate_full_blocks=False.

**torch.compile and CUDA graphs.** The kernel is the custom op `torch.ops.cubridge.attention` with a fake
implementation; under torch.compile the variant is chosen while tracing and the captured tensors become
graph inputs (their values may change between calls; their shapes are guarded). A Python number a hook reads
(a closure variable or module constant) is compiled into the kernel: torch.compile guards on it and traces
again when it changes. Outside torch.compile the op's implementation runs directly (no dispatcher hop).
Launches go to torch's current stream, so a call can be captured in a CUDA graph; block lists built during a
capture are part of the graph and follow the captured tensors' values at each replay.

**Without a supported GPU** (CPU tensors, or a GPU older than sm_80) the result comes from
`cubridge.reference.attention_reference` on the traced hooks, chunked over query rows, with a warning once.

The forward pass only: inputs that require grad under grad mode are rejected.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import math
import operator
import sys
import threading
import time
import types
import warnings
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.spec import NORMALIZATIONS, AttentionSpec, spec_from_hooks
from cubridge.frontends.hooks import cell_value, global_names, read_attributes
from cubridge.files import write_atomically
from cubridge.runtime.attention import layout_key
from cubridge.runtime.kernel_inputs import GivenBlockLists
from cubridge.reference import attention_reference
from cubridge.runtime.compiler import cache_dir
from cubridge.runtime.errors import InvalidInputError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from cubridge.runtime.attention import AttentionLaunch
    from cubridge.runtime.variant import VariantKernel, VariantPlan

FALLBACK_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
PLAIN = ""  # the variant name of attention without hooks
PROGRESS_AFTER_S = 1.0
_BINDINGS_LIMIT = 256
_SCALARS = (bool, int, float, str, type(None))


class AttentionError(InvalidInputError):
    """A bad argument to cubridge.attention; the message names the argument."""


# ------------------------------------------------------------------------------------------------------------
# Variants and bindings
# ------------------------------------------------------------------------------------------------------------


@dataclass
class _Variant:
    """A traced spec and its kernels, one per reference program."""

    key: str
    spec: AttentionSpec
    capture_names: tuple[str, ...]  # the spec's captured tensors, in its order (the kernels')
    kernels: dict[str, object] = field(default_factory=dict)

    def kernel(self, reference: str):
        """The spec's VariantKernel on `reference`: transferred, quickly verified and lowered on first use."""
        kernel = self.kernels.get(reference)
        if kernel is None:
            from cubridge.runtime.variant import build_variant

            with _progress(f"building the {self.spec.name} variant on the {reference} reference"):
                kernel = build_variant(self.spec, reference, verify=_announced_quick_verify, progress=_progress)
            self.kernels[reference] = kernel
        return kernel


@dataclass(frozen=True)
class _Binding:
    """A variant bound to hook objects: where the hooks' captured tensors are (paths from the hooks, in
    `_Variant.capture_names` order), the Python values they read (paths and values: a change means another
    variant), and the captured tensors' (dtype, shape)s the variant was traced for."""

    key: str
    capture_paths: tuple[tuple, ...]
    guards: tuple[tuple[tuple, object], ...]
    signature: tuple[tuple[torch.dtype, tuple[int, ...]], ...]
    # the paths' readers (`_reader`), made once: every call reads the captured tensors and guarded values
    _capture_readers: tuple[Callable, ...] = field(init=False, repr=False, compare=False)
    _guard_readers: tuple[tuple[Callable, object], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_capture_readers", tuple(map(_reader, self.capture_paths)))
        object.__setattr__(self, "_guard_readers", tuple((_reader(path), value) for path, value in self.guards))

    def captures_now(self, hooks: tuple) -> list[torch.Tensor] | None:
        """The hooks' captured tensors now, or None where the binding no longer holds: a captured tensor is not
        one of the traced dtype and shape (rebound, or changed in place), or a Python value the hooks read
        changed."""
        captures = []
        for read, (dtype, shape) in zip(self._capture_readers, self.signature):
            tensor = read(hooks)
            if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype or tensor.shape != shape:
                return None
            captures.append(tensor)
        for read, value in self._guard_readers:
            now = read(hooks)
            if now is not value and now != value:
                return None
        return captures


_VARIANTS: dict[str, _Variant] = {}
_BINDINGS: dict[tuple, _Binding] = {}


def _bind(score_mod: Callable | None, mask_mod: Callable | None, normalization: str) -> _Binding:
    """Trace the hooks (or find their variant), and bind it to these hook objects."""
    hooks = (score_mod, mask_mod)
    capture_paths, guards = _paths(hooks)
    if score_mod is None and mask_mod is None and normalization != "softmax":
        score_mod = _unchanged_score  # sigmoid / relu attention without hooks: the identity score_mod
    with _progress("tracing the hooks"):
        spec = _spec(score_mod, mask_mod, normalization)
    names = tuple(spec.captures)
    paths = {name: path for name, path in capture_paths if name in spec.captures}
    key = hashlib.sha256(f"{spec.name}\0{normalization}\0{spec.identity()}".encode()).hexdigest()[:32]
    variant = _VARIANTS.setdefault(key, _Variant(key, spec, names))
    captures = [_resolve(hooks, paths[name]) for name in variant.capture_names]
    return _Binding(key, tuple(paths[name] for name in variant.capture_names), guards,
                    tuple((t.dtype, tuple(t.shape)) for t in captures))


def _spec(score_mod, mask_mod, normalization: str) -> AttentionSpec:
    try:
        return spec_from_hooks(score_mod, mask_mod, normalization)
    except CuBridgeError as error:
        raise AttentionError(str(error)) from None


def _unchanged_score(score, b, h, q_idx, kv_idx):
    return score


@torch.compiler.assume_constant_result
def _traced_binding(score_mod, mask_mod, normalization: str) -> tuple:
    """(key, capture paths, guards) of the hooks, for torch.compile: computed while tracing, a constant of
    the graph (torch.compile guards on the hooks' code). The hooks are traced on another thread: the
    compiler's fake-tensor mode is active on this one, and make_fx needs its own."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        binding = pool.submit(_bind, score_mod, mask_mod, normalization).result()
    for path, _ in binding.guards:
        if isinstance(_resolve((score_mod, mask_mod), path), torch.Tensor):
            raise AttentionError(f"{('score_mod', 'mask_mod')[path[0]]} reads the 0-d tensor '{path[-1]}', which "
                                 "is compiled in as a constant: under torch.compile make it a Python number, or "
                                 "a 1-element tensor read as [0] (a kernel argument)")
    return binding.key, binding.capture_paths, binding.guards


def _binding(score_mod, mask_mod, normalization: str) -> tuple[_Binding, list[torch.Tensor]]:
    """The hooks' binding (from memory while the Python values they read are unchanged) and their captured
    tensors now."""
    hooks = (score_mod, mask_mod)
    binding = _BINDINGS.get((score_mod, mask_mod, normalization))
    captures = None if binding is None else binding.captures_now(hooks)
    if captures is not None:
        return binding, captures
    if len(_BINDINGS) >= _BINDINGS_LIMIT:
        _BINDINGS.clear()
    binding = _BINDINGS[score_mod, mask_mod, normalization] = _bind(score_mod, mask_mod, normalization)
    return binding, [_resolve(hooks, path) for path in binding.capture_paths]


def _paths(hooks: tuple) -> tuple[tuple[tuple[str, tuple], ...], tuple[tuple[tuple, object], ...]]:
    """Where the hooks' captured tensors are, by name (first path found), and the Python scalars and 0-d
    tensors they read (constants of the trace) with their values. A path starts at score_mod (0) or mask_mod
    (1) and goes through globals, closure cells, functools.partial parts, tuple or list items and the attributes
    the code names of the objects, classes and modules it reads (`read_attributes`), as the trace key
    (`frontends.spec.hooks_trace_key`) follows them; a scalar is guarded wherever it is found, a tensor taken
    only as a named global or closure variable (the spec frontend's captures)."""
    captures: dict[str, tuple] = {}
    guards: list[tuple[tuple, object]] = []
    pending = [(hook, (index,), None, frozenset()) for index, hook in enumerate(hooks) if hook is not None]
    seen: set[int] = set()
    while pending:
        value, path, name, names = pending.pop()
        if isinstance(value, torch.Tensor) and value.dim() == 0:
            guards.append((path, value.item()))  # traced as a constant, like a Python number
        elif isinstance(value, torch.Tensor):
            if name is not None:
                captures.setdefault(name, path)
        elif isinstance(value, _SCALARS):
            guards.append((path, value))
        elif isinstance(value, tuple | list):
            pending += [(element, path + ("item", i), None, names) for i, element in enumerate(value)]
        elif id(value) not in seen:
            seen.add(id(value))
            pending += _parts(value, path, names)
    return tuple(captures.items()), tuple(guards)


def _parts(value, path: tuple, names: frozenset[str]) -> list[tuple[object, tuple, str | None, frozenset[str]]]:
    """(value, path, name, the names of the code reading it) of what `value` holds that hook code can read: a
    hook function's globals and closure cells, by name (functions only from its own file or its closure); a
    partial's function and arguments; a bound method's function and `self`; an object's, class's or module's
    attributes that `names` (its reader's code) names."""
    if isinstance(value, functools.partial):
        func = value.func
        arguments = frozenset(global_names(func.__code__)) if isinstance(func, types.FunctionType) else names
        return [(func, path + ("func", 0), None, names),
                *[(arg, path + ("args", i), None, arguments) for i, arg in enumerate(value.args)],
                *[(arg, path + ("keywords", key), None, arguments) for key, arg in value.keywords.items()]]
    if isinstance(value, types.MethodType):  # a bound method: its function, and the `self` that function reads
        return [(value.__func__, path + ("method", 0), None, names),
                (value.__self__, path + ("self", 0), None, frozenset(global_names(value.__func__.__code__)))]
    if not isinstance(value, types.FunctionType):
        return [(attribute, path + ("attr", attribute_name), None, names)
                for attribute_name, attribute in read_attributes(value, names)]
    code = value.__code__
    own = frozenset(global_names(code))
    named = [(value.__globals__[name], path + ("global", name), name)
             for name in sorted(own) if name in value.__globals__]
    named += [(cell_value(cell), path + ("closure", i), name)
              for i, (name, cell) in enumerate(zip(code.co_freevars, value.__closure__ or ()))]
    return [(item, item_path, name, own) for item, item_path, name in named
            if not isinstance(item, types.FunctionType)
            or item_path[-2] == "closure" or item.__code__.co_filename == code.co_filename]


def _resolve(hooks: tuple, path: tuple):
    """The value at `path` from the hooks (plain attribute and item reads: torch.compile traces them)."""
    return _reader(path)(hooks)


def _reader(path: tuple) -> Callable[[tuple], object]:
    """The function from the hooks to the value at `path`, its steps chosen once (a binding reads its paths on
    every call)."""
    read = operator.itemgetter(path[0])
    for position in range(1, len(path), 2):
        read = _STEP_READERS[path[position]](read, path[position + 1])
    return read


# a path's step -> (the reader up to the step, the step's argument) -> the reader through the step
_STEP_READERS: dict[str, Callable[[Callable, object], Callable]] = {
    "global": lambda read, name: lambda hooks: read(hooks).__globals__[name],
    "closure": lambda read, index: lambda hooks: read(hooks).__closure__[index].cell_contents,
    "func": lambda read, _: lambda hooks: read(hooks).func,
    "args": lambda read, index: lambda hooks: read(hooks).args[index],
    "keywords": lambda read, name: lambda hooks: read(hooks).keywords[name],
    "item": lambda read, index: lambda hooks: read(hooks)[index],
    "attr": lambda read, name: lambda hooks: getattr(read(hooks), name),
    "method": lambda read, _: lambda hooks: read(hooks).__func__,
    "self": lambda read, _: lambda hooks: read(hooks).__self__,
}


# ------------------------------------------------------------------------------------------------------------
# Progress and verification
# ------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _progress(step: str):
    """Says `step` on stderr once it has run for PROGRESS_AFTER_S, and how long it took."""
    start = time.perf_counter()
    announced = threading.Event()

    def announce():
        announced.set()
        print(f"cubridge: {step} ...", file=sys.stderr, flush=True)

    timer = threading.Timer(PROGRESS_AFTER_S, announce)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if announced.is_set():
            print(f"cubridge: {step}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def _announced_quick_verify(spec: AttentionSpec, program: ModuleOp) -> None:
    with _progress(f"verifying the {spec.name} variant in the executor"):
        quick_verify(spec, program)


def quick_verify(spec: AttentionSpec, program: ModuleOp) -> None:
    """Execute `program` (the spec transferred onto one reference program) on the CPU on the largest of the
    default shapes it serves (past a tile edge, as far into the captured tensors as they reach; one seed with widened
    scores, one schedule) against the spec's float64 reference (from the traced hooks on CPU copies of the
    captured tensors); a failure is a CuBridgeError. A verified program is recorded on disk by its text and
    spec, so each variant is checked once per machine."""
    from cubridge.interpreter.executor import KernelPlan, find_kernel
    from cubridge.interpreter.shapes import default_shapes
    from cubridge.interpreter.verify import verify

    marker = cache_dir() / "verified" / hashlib.sha256((str(program) + spec.identity()).encode()).hexdigest()
    if marker.is_file():
        return
    traced = spec.with_traced_hooks("cpu")  # the user's hooks may read GPU tensors
    plan = KernelPlan(find_kernel(program))
    shapes = [shape for shape in default_shapes(plan.kernel, traced, plan.head_dim) if plan.refusal(shape) is None]
    if not shapes:
        raise CuBridgeError(f"{spec.name}: no verification shape fits the captured tensors and the kernel serves")
    largest = max(shapes, key=lambda shape: (shape.seqlen_q * shape.seqlen_kv, shape.heads_q != shape.heads_kv))
    result = verify(program, spec=traced, shapes=[largest], seeds=(1,), schedules=1)
    if not result.ok:
        raise CuBridgeError(f"{spec.name}: the transferred kernel failed its quick verification: "
                            f"{result.summary()}")
    try:
        write_atomically(marker, result.summary(), make_directories=True)
    except OSError:
        return


# ------------------------------------------------------------------------------------------------------------
# The op
# ------------------------------------------------------------------------------------------------------------


@functools.cache
def _reference_for(device: torch.device) -> str | None:
    """The reference program a tensor's device runs (sm90 on sm_90, sm80 on other sm_80+), None for the
    fallback; once per device (a tensor's CUDA device carries its index)."""
    if device.type != "cuda":
        return None
    capability = torch.cuda.get_device_capability(device)
    if capability == (9, 0):
        return "sm90"
    return "sm80" if capability >= (8, 0) else None


_warned = False


def _warn_fallback(device: torch.device) -> None:
    global _warned
    if not _warned:
        _warned = True
        where = "CPU tensors" if device.type == "cpu" else f"{device} is older than sm_80"
        warnings.warn(f"cubridge.attention: {where}: computing with the eager PyTorch reference "
                      "(cubridge.reference), not a CuBridge kernel", stacklevel=5)


def _fallback(variant: _Variant | None, query, key, value, captures: list[torch.Tensor], scale: float,
              return_lse: bool):
    """The eager reference on the traced hooks with these captured tensors."""
    _warn_fallback(query.device)
    score_mod = mask_mod = None
    normalization = "softmax"
    if variant is not None:
        spec = dataclasses.replace(variant.spec, captures=dict(zip(variant.capture_names, captures)))
        normalization = spec.normalization
        try:
            spec.check_evaluable(tuple(query.shape), tuple(key.shape))
        except CuBridgeError as error:
            raise AttentionError(str(error)) from None
        score_mod, mask_mod = spec.broadcast_hooks(query.device)
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    result = attention_reference(query, key, value, score_mod, mask_mod, scale=scale, normalization=normalization,
                                 compute_dtype=compute, return_lse=return_lse, broadcast_hooks=True)
    return (result[0], result[1].float()) if return_lse else (result, None)


def _run(query, key, value, captures: list[torch.Tensor], block_lists: list[torch.Tensor], block_shape: list[int],
         variant_key: str, scale: float, return_lse: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The op's implementation: (out, lse; None without return_lse) from the variant's kernel on a supported GPU,
    else from the eager reference."""
    reference = _reference_for(query.device)
    if reference is None:
        return _fallback(_variant(variant_key), query, key, value, captures, scale, return_lse)
    given = _given_lists(block_lists, block_shape) if block_lists else None
    kernel, plan = _planned(reference, variant_key, layout_key(query, key, value), query, key, value, scale,
                            return_lse, captures, given)
    return _enqueue(kernel, plan, query, key, value, captures, given)


def _variant(variant_key: str) -> _Variant | None:
    """The variant under `variant_key`, None for attention without hooks (PLAIN)."""
    if variant_key == PLAIN:
        return None
    variant = _VARIANTS.get(variant_key)
    if variant is None:
        raise AttentionError(f"variant {variant_key} is not known to this process (a graph compiled "
                             "elsewhere); call cubridge.attention once with its hooks first")
    return variant


def _planned(reference: str, variant_key: str, layout: tuple, query, key, value, scale: float, return_lse: bool,
             captures: list[torch.Tensor], given: GivenBlockLists | None,
             ) -> tuple[VariantKernel | None, AttentionLaunch | VariantPlan]:
    """(the variant's kernel, None without hooks; its launch plan for these arguments), checked and made on
    their layout's first call."""
    variant = _variant(variant_key)
    if variant is None:
        return None, _plain_planner(reference)(layout, query, key, value, False, scale, return_lse)
    kernel = variant.kernel(reference)
    return kernel, kernel.plan_for(layout, query, key, value, scale, return_lse, captures, given)


@functools.cache
def _plain_planner(reference: str) -> Callable:
    """The reference kernel's planner (`plan_sm90` or `plan_sm80`), imported once."""
    from cubridge.runtime.attention import plan_sm80
    from cubridge.runtime.attention_sm90 import plan_sm90

    return plan_sm90 if reference == "sm90" else plan_sm80


@dataclass(frozen=True)
class _Call:
    """A call's checked arguments bound to its launch plan: the next call with the same hooks, BlockMask, scale
    and flags, on inputs of the same layout, skips the argument checks and lookups (host time per call matters
    for short kernels). It still reads what may differ between such calls: the hooks' captured tensors and the
    Python values they read (`_Binding.captures_now`), the BlockMask's lists where the kernel takes them, and
    grad mode."""

    layout: tuple
    hooks: tuple
    binding: _Binding | None  # None without hooks
    block_mask: object | None  # the BlockMask passed, if any (the latest one per hooks and flags is kept)
    given: GivenBlockLists | None  # its lists, where the plan takes them (not where the kernel builds its own)
    listed: tuple | None  # its lists' state where they are the mask (no mask_mod): `_lists_state`
    kernel: VariantKernel | None  # None: the reference kernel
    plan: AttentionLaunch | VariantPlan  # the kernel's launch plan for the layout

    def __call__(self, query, key, value, block_mask) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """(out, lse or None), or None where this call is not the bound one (the checked path then runs)."""
        if block_mask is not self.block_mask or layout_key(query, key, value) != self.layout:
            return None
        if self.listed is not None and _lists_state(block_mask) != self.listed:
            return None
        if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
            return None
        captures = [] if self.binding is None else self.binding.captures_now(self.hooks)
        if captures is None:
            return None
        given = None
        if self.given is not None:
            block_lists, block_shape = _block_mask_lists(block_mask, self.binding.key)
            given = _given_lists(block_lists, block_shape) if block_lists else None
            if given is not self.given:
                return None
        return _enqueue(self.kernel, self.plan, query, key, value, captures, given)


def _enqueue(kernel: VariantKernel | None, plan: AttentionLaunch | VariantPlan, query, key, value,
             captures: list[torch.Tensor], given: GivenBlockLists | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(out, lse or None) of `plan` (the reference kernel's where `kernel` is None, else the variant kernel's) on
    torch's current stream."""
    if kernel is None:
        return plan.enqueue(query, key, value)
    return kernel.run(plan, query, key, value, captures, given)


# (score_mod, mask_mod, normalization, scale, enable_gqa, return_lse, whether a BlockMask is passed) -> the latest
# call's binding: a new BlockMask replaces the previous one's, so that no more of them are kept alive than one per key
_CALLS: dict[tuple, _Call] = {}
_CALLS_LIMIT = 64


@torch.library.custom_op("cubridge::attention", mutates_args=())
def _attention_op(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, captures: list[torch.Tensor],
                  block_lists: list[torch.Tensor], block_shape: list[int], variant: str, scale: float,
                  return_lse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run(query, key, value, captures, block_lists, block_shape, variant, scale, return_lse)
    return out, (lse if lse is not None else query.new_empty((0,), dtype=torch.float32))


@_attention_op.register_fake
def _attention_fake(query, key, value, captures, block_lists, block_shape, variant, scale, return_lse):
    batch, heads, seqlen_q, _ = query.shape
    lse_shape = (batch, heads, seqlen_q) if return_lse else (0,)
    return torch.empty_like(query, memory_format=torch.contiguous_format), query.new_empty(lse_shape,
                                                                                          dtype=torch.float32)


# ------------------------------------------------------------------------------------------------------------
# The entry point
# ------------------------------------------------------------------------------------------------------------


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod: Callable | None = None,
              block_mask=None, scale: float | None = None, enable_gqa: bool = False, return_lse: bool = False,
              kernel_options: dict | None = None, *, return_aux=None, mask_mod: Callable | None = None,
              normalization: str = "softmax"):
    """flex_attention(query, key, value, score_mod, block_mask, scale, enable_gqa, return_lse, kernel_options,
    *, return_aux) computed by a CuBridge kernel (see the module docstring). query [B, HQ, SQ, D], key and
    value [B, HKV, SKV, D]; returns out [B, HQ, SQ, D] in query's dtype and, with return_lse (or
    return_aux=AuxRequest(lse=True): an AuxOutput), the natural-log LSE, float32 [B, HQ, SQ] (-inf for fully
    masked rows, whose output is 0). kernel_options, FlexAttention's tuning of its own kernels, is accepted
    and does not apply."""
    compiling = torch.compiler.is_compiling()
    eager = (return_aux is None and not compiling and type(query) is torch.Tensor and type(key) is torch.Tensor
             and type(value) is torch.Tensor)
    call_key = ((score_mod, mask_mod, normalization, scale, enable_gqa, return_lse, block_mask is None) if eager
                else None)
    if eager:
        try:
            call = _CALLS.get(call_key)
        except TypeError:  # an unhashable argument: the checks below name it, or the call runs unbound
            call_key = call = None
        result = None if call is None else call(query, key, value, block_mask)
        if result is not None:
            return result if return_lse else result[0]
    mask_mod = _mask_of(block_mask, mask_mod)
    if block_mask is not None:
        mask_q_len, mask_kv_len = block_mask.seq_lengths
        if query.shape[2] > mask_q_len or key.shape[2] > mask_kv_len:
            raise AttentionError(f"block_mask: made for Q_LEN, KV_LEN = ({mask_q_len}, {mask_kv_len}), shorter than "
                                 f"the inputs' {query.shape[2]}, {key.shape[2]}: make a BlockMask for these lengths")
    if return_aux is not None:
        if return_lse:
            raise AttentionError("return_aux: pass return_aux or return_lse, not both")
        if getattr(return_aux, "max_scores", False):
            raise AttentionError("return_aux: max_scores is not computed by CuBridge kernels; request lse only")
        return_lse = bool(getattr(return_aux, "lse", False))
    scale, layout = _check(query, key, value, score_mod, mask_mod, scale, enable_gqa, return_lse, normalization,
                           compiling)
    binding = None
    if score_mod is None and mask_mod is None and normalization == "softmax":
        variant_key, captures = PLAIN, []
    elif compiling:
        for role, hook in (("score_mod", score_mod), ("mask_mod", mask_mod)):
            if isinstance(hook, functools.partial | types.MethodType):  # not constants to torch.compile
                raise AttentionError(f"{role}: a {type(hook).__name__} cannot be traced under torch.compile; pass a "
                                     "function (module-level, or a closure over the values it reads)")
        variant_key, capture_paths, guards = _traced_binding(score_mod, mask_mod, normalization)
        hooks = (score_mod, mask_mod)
        captures = [_resolve(hooks, path) for path in capture_paths]
        for path, expected in guards:
            if _resolve(hooks, path) != expected:  # never taken while tracing: makes torch.compile guard on it
                raise AttentionError("a Python value the hooks read changed while tracing")
    else:
        binding, captures = _binding(score_mod, mask_mod, normalization)
        variant_key = binding.key
    block_lists, block_shape = _block_mask_lists(block_mask, variant_key)
    reference = None if compiling or type(query) is not torch.Tensor else _reference_for(query.device)
    if reference is not None:
        given = _given_lists(block_lists, block_shape) if block_lists else None
        kernel, plan = _planned(reference, variant_key, layout, query, key, value, scale, return_lse, captures, given)
        if call_key is not None:
            if len(_CALLS) >= _CALLS_LIMIT:
                _CALLS.clear()
            taken = given if kernel is not None and plan.uses_given_lists else None
            listed = _lists_state(block_mask) if mask_mod in _LISTED_BLOCKS.values() else None
            _CALLS[call_key] = _Call(layout, (score_mod, mask_mod), binding, block_mask, taken, listed, kernel, plan)
        out, lse = _enqueue(kernel, plan, query, key, value, captures, given)
    else:
        arguments = (query, key, value, captures, block_lists, block_shape, variant_key, scale, return_lse)
        out, lse = _attention_op(*arguments) if compiling or type(query) is not torch.Tensor else _run(*arguments)
    if return_aux is not None:
        from torch.nn.attention.flex_attention import AuxOutput

        return out, AuxOutput(lse=lse if return_lse else None)
    return (out, lse) if return_lse else out


@functools.cache
def _flex_block_mask_types() -> tuple[type, Callable]:
    """FlexAttention's BlockMask class and its noop_mask, imported on the first BlockMask."""
    from torch.nn.attention.flex_attention import BlockMask, noop_mask

    return BlockMask, noop_mask


def _mask_of(block_mask, mask_mod: Callable | None) -> Callable | None:
    """The mask_mod to compile: mask_mod=, or the BlockMask's."""
    if block_mask is None:
        return mask_mod
    BlockMask, noop_mask = _flex_block_mask_types()
    if not isinstance(block_mask, BlockMask):
        raise AttentionError(f"block_mask must be a BlockMask (create_block_mask), got {type(block_mask).__name__}")
    if mask_mod is not None and mask_mod is not block_mask.mask_mod:
        raise AttentionError("mask_mod and block_mask.mask_mod differ: pass one of them")
    if block_mask.mask_mod is not noop_mask:
        return block_mask.mask_mod
    if torch.compiler.is_compiling():
        raise AttentionError("block_mask: a BlockMask without a mask_mod (its lists are the mask) is taken in eager "
                             "calls only; under torch.compile build it with create_block_mask from a mask_mod")
    return _listed_blocks_mask(block_mask)


def _lists_state(block_mask) -> tuple:
    """What a BlockMask's lists are now: their tensors' ids and versions (an in-place change or `set_` bumps a
    version), block size and lengths."""
    tensors = (block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.full_kv_num_blocks,
               block_mask.full_kv_indices)
    return (*((id(t), t._version) for t in tensors if t is not None), *block_mask.BLOCK_SIZE,
            *block_mask.seq_lengths)


def _listed_blocks_mask(block_mask) -> Callable:
    """The mask a BlockMask without a mask_mod stands for (noop_mask: `BlockMask.from_kv_blocks` without one), as
    a mask_mod: a key is kept where its kv block is listed, partial or full, for the query's block, as FlexAttention
    computes it (a partial block's noop_mask keeps every key). One hook per state of the lists (`_lists_state`),
    the latest kept: it reads a bool table [B or 1, H or 1, query blocks, kv blocks] made from the lists."""
    state = _lists_state(block_mask)
    hook = _LISTED_BLOCKS.get(state)
    if hook is not None:
        return hook
    listed = _listed_table(block_mask)
    block_m, block_n = block_mask.BLOCK_SIZE
    b_step, h_step = int(listed.shape[0] > 1), int(listed.shape[1] > 1)  # 0: one plane for every batch / head

    def listed_block(b, h, q_idx, kv_idx):
        return listed[b * b_step, h * h_step, q_idx // block_m, kv_idx // block_n]

    _LISTED_BLOCKS.clear()
    _LISTED_BLOCKS[state] = listed_block
    return listed_block


def _listed_table(block_mask) -> torch.Tensor:
    """bool [B or 1, H or 1, QB, KB]: whether kv block j is listed (partial or full) for query block i."""
    kv_blocks = -(-block_mask.seq_lengths[1] // block_mask.BLOCK_SIZE[1])
    num_blocks, indices = block_mask.kv_num_blocks, block_mask.kv_indices
    table = torch.zeros(*indices.shape[:3], kv_blocks + 1, dtype=torch.bool, device=indices.device)
    pairs = [(num_blocks, indices)]
    if block_mask.full_kv_num_blocks is not None:
        pairs.append((block_mask.full_kv_num_blocks, block_mask.full_kv_indices))
    for counts, columns in pairs:
        listed = torch.arange(columns.shape[-1], device=columns.device) < counts.unsqueeze(-1)
        # entries past a row's count, and indices outside the keys' blocks, land in the last column, dropped
        kept = listed & (columns >= 0) & (columns < kv_blocks)
        table.scatter_(-1, torch.where(kept, columns.long(), kv_blocks), True)
    return table[..., :kv_blocks].contiguous()


_LISTED_BLOCKS: dict[tuple, Callable] = {}  # the latest BlockMask without a mask_mod: its lists' state -> hook


def _block_mask_lists(block_mask, variant_key: str) -> tuple[list[torch.Tensor], list[int]]:
    """The BlockMask's four block lists and [BLOCK_M, BLOCK_N, Q_LEN, KV_LEN], or ([], []) without a
    BlockMask (or one built with separate_full_blocks=False): the kernel decides whether they fit."""
    if block_mask is None or variant_key == PLAIN or block_mask.full_kv_num_blocks is None:
        return [], []
    tables = [block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.full_kv_num_blocks,
              block_mask.full_kv_indices]
    return tables, [*block_mask.BLOCK_SIZE, *block_mask.seq_lengths]


def _given_lists(block_lists: list[torch.Tensor], block_shape: list[int]) -> GivenBlockLists:
    """The BlockMask's lists as one object, the same while its tensors are unchanged (the kernel decides whether
    they fit, and keeps their expansion while they are the same object): the entry keeps the tensors, so their
    ids stay theirs; an in-place change or `set_` bumps a version."""
    kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices = block_lists
    identity = (id(kv_num_blocks), kv_num_blocks._version, id(kv_indices), kv_indices._version,
                id(full_kv_num_blocks), full_kv_num_blocks._version, id(full_kv_indices), full_kv_indices._version,
                *block_shape)
    given = _GIVEN_LISTS.get(identity)
    if given is None:
        given = GivenBlockLists.of(block_lists, block_shape)
        _GIVEN_LISTS.clear()
        _GIVEN_LISTS[identity] = given
    return given


_GIVEN_LISTS: dict[tuple, GivenBlockLists] = {}  # the latest BlockMask's


def _check(query, key, value, score_mod, mask_mod, scale, enable_gqa: bool, return_lse: bool, normalization: str,
           compiling: bool) -> tuple[float, tuple | None]:
    """One-line AttentionErrors naming the argument; returns the scale (default 1/sqrt(D)) and the inputs'
    `layout_key`. While torch.compile traces (`compiling`: symbolic shapes, no Python state to keep), and for
    tensor subclasses (which go through the op), the tensor checks run without the cache and there is no layout
    key (None)."""
    if not (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor) and isinstance(value, torch.Tensor)):
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            if not isinstance(tensor, torch.Tensor):
                raise AttentionError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    layout = None
    if compiling or type(query) is not torch.Tensor:
        _check_layout(query, key, value, enable_gqa)
    else:
        layout = _check_layout_once(query, key, value, enable_gqa)
    if score_mod is not None and not callable(score_mod):
        raise AttentionError(f"score_mod must be a function, got {type(score_mod).__name__}")
    if mask_mod is not None and not callable(mask_mod):
        raise AttentionError(f"mask_mod must be a function, got {type(mask_mod).__name__}")
    if normalization not in NORMALIZATIONS:
        raise AttentionError(f"normalization must be one of {', '.join(NORMALIZATIONS)}; got {normalization!r}")
    if return_lse and normalization != "softmax":
        raise AttentionError(f"return_lse: the {normalization} normalization has no log-sum-exp")
    if (query.requires_grad or key.requires_grad or value.requires_grad) and torch.is_grad_enabled():
        raise AttentionError("cubridge.attention computes the forward pass only (no backward): call it under "
                             "torch.no_grad() or torch.inference_mode(), or detach the inputs")
    if scale is None:
        return 1.0 / math.sqrt(query.shape[3]), layout
    if not isinstance(scale, int | float) or not scale > 0:
        raise AttentionError(f"scale must be a positive number (masked scores are -inf); got {scale!r}")
    return float(scale), layout


# (layout_key, enable_gqa) of the query, key and value that _check_layout accepted: a repeated call skips those
# checks (host time per call matters for short kernels), and the layout key goes on to find the launch plan (the
# runtime's own checks run once per plan).
_CHECKED_LAYOUTS: set[tuple] = set()
_CHECKED_LAYOUTS_LIMIT = 1024


def _check_layout_once(query, key, value, enable_gqa: bool) -> tuple:
    """_check_layout, skipped for a layout it accepted before; returns the inputs' `layout_key`."""
    layout = layout_key(query, key, value)
    if (layout, enable_gqa) in _CHECKED_LAYOUTS:
        return layout
    _check_layout(query, key, value, enable_gqa)
    if len(_CHECKED_LAYOUTS) >= _CHECKED_LAYOUTS_LIMIT:
        _CHECKED_LAYOUTS.clear()
    _CHECKED_LAYOUTS.add((layout, enable_gqa))
    return layout


def _check_layout(query, key, value, enable_gqa: bool) -> None:
    """One-line AttentionErrors unless query, key and value are 4-D floating tensors of one dtype and device
    with matching shapes (grouped-query heads only with enable_gqa)."""
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dim() != 4:
            raise AttentionError(f"{name} must be 4-D [B, H, S, D]; got shape {tuple(tensor.shape)}")
        if tensor.dtype not in FALLBACK_DTYPES:
            raise AttentionError(f"{name} has dtype {tensor.dtype}; expected a floating-point dtype")
    (batch, heads_q, _, head_dim), key_shape = query.shape, key.shape
    if not query.dtype == key.dtype == value.dtype:
        raise AttentionError(f"query, key, value dtypes differ: {query.dtype}, {key.dtype}, {value.dtype}")
    if not query.device == key.device == value.device:
        raise AttentionError(f"query, key, value are on different devices: {query.device}, {key.device}, "
                             f"{value.device}")
    if key_shape[:3] == value.shape[:3] and key_shape[3] != value.shape[3]:
        raise AttentionError(f"value head dim {value.shape[3]} differs from the query/key head dim {key_shape[3]}: "
                             "CuBridge's kernels take one head dim for q, k and v")
    if key_shape != value.shape:
        raise AttentionError(f"key and value shapes differ: {tuple(key_shape)} vs {tuple(value.shape)}")
    if batch != key_shape[0]:
        raise AttentionError(f"batch sizes differ: query has {batch}, key/value have {key_shape[0]}")
    if head_dim != key_shape[3]:
        raise AttentionError(f"head dims differ: query has {head_dim}, key/value have {key_shape[3]}")
    if heads_q != key_shape[1]:
        if not enable_gqa:
            raise AttentionError(f"enable_gqa: query has {heads_q} heads and key/value {key_shape[1]}; "
                                 "pass enable_gqa=True for grouped-query attention")
        if heads_q % key_shape[1]:
            raise AttentionError(f"enable_gqa: query heads ({heads_q}) must be a multiple of key/value "
                                 f"heads ({key_shape[1]})")
