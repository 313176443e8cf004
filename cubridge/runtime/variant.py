"""Attention variants on the GPU: a spec transferred onto a reference program (lifted from
kernels/attention_sm90.cu or attention_sm80.cu, once per process), lowered to CUDA, compiled per (dtype, head
dim) instance on first use and launched on torch tensors.

    kernel = build_variant("examples/specs/softcap.py", reference="sm90")
    out = kernel(q, k, v)                        # captured tensors come from the spec
    out, lse = kernel(q, k, v, return_lse=True)  # softmax variants only
    out = kernel(q, k, v, document_id=ids)       # a captured tensor overridden by keyword

Captured tensors travel as kernel arguments (f32 or i32 copies on q's device; their reads are bounds-checked
on the host once per shape). A mask the symbolic analysis cannot bound gets FlexAttention-style block lists,
built on the GPU and cached per (captured tensors, shape). Every launch parameter comes from the transferred
program: threads, the schedule (a `dynamic` schedule claims tiles from a zeroed counter), the tile sizes; a Hopper
variant whose work tiles of a head all visit the same kv tiles launches its K/V pairs' entry point where the
reference kernel would launch its own (attention_sm90.shares_kv_in_pairs).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from cubridge.diagnostics import CuBridgeError
from cubridge.files import write_atomically
from cubridge.frontends.spec import AttentionSpec, load_spec
from cubridge.lowering import REFERENCES, LoweredKernel, ReferenceSource, cloned_pairs, lower_module
from cubridge.interpreter.executor import find_kernel
from cubridge.passes.transfer import transfer_kernel
import cubridge.runtime.attention as sm80_host
from cubridge.runtime.attention_sm90 import Sm90Launch, shares_kv_in_pairs
from cubridge.runtime.attention_sm90 import entry_point as sm90_entry_point
from cubridge.runtime.attention_sm90 import shared_bytes as sm90_shared_bytes
from cubridge.runtime.attention import (DTYPE_NAMES, AttentionLaunch, Sm80Launch, check_tensors, layout_key,
                                        planned, prepare_launch)
from cubridge.runtime.compiler import (KERNELS_DIR, CompiledKernel, SerializedGemmsWarning, cache_dir,
                                       compile_cubin)
from cubridge.runtime.driver import current_stream, load_function, stream_capturing
from cubridge.runtime.errors import InvalidInputError, UnsupportedArchError
from cubridge.runtime.kernel_inputs import (FULL_NUM_BLOCKS, MASK_BITS, NUM_BLOCKS, TABLES, GivenBlockLists,
                                            block_list_shapes, build_block_lists, captured_table,
                                            mask_bits_shape, mask_planes, tile_order)

# Where each reference's CuIR comes from: the lift of its CUDA source (`cuir-opt --lift=ENTRY`), one entry point
# per kv tile size (keys). Head dims that share a kv tile share one transferred program, which the lowering
# instantiates for each of them.
LIFTED_PROGRAMS = {
    "sm90": (KERNELS_DIR / "attention_sm90.cu", {128: "attention_sm90_bf16_d128_full",
                                                 192: "attention_sm90_bf16_d64_full",
                                                 80: "attention_sm90_bf16_d256_full"}),
    "sm80": (KERNELS_DIR / "attention_sm80.cu", {64: "attention_sm80_bf16_d128_full"}),
}
# The K/V pair entry points' lifts (two-CTA clusters), by kv tile: a variant that runs in pairs is verified in that
# form too.
PAIR_PROGRAMS = {"sm90": {128: "attention_sm90_bf16_d128_full_pairs"}}
REFERENCE_NAMES = ("sm90", "sm80")
# Problem shapes whose block lists and tables a variant keeps (the latest made): a model that calls one
# variant on a few shapes in turn does not rebuild its lists at each call. Per shape only the latest captured
# tensors' lists are kept (new values replace them), so memory grows with the shapes, not with the calls:
# 16k tokens x 32 heads in 128 x 128 tiles take 4 MiB, and a Hopper kernel's mask bits S^2 / 8 bytes a plane
# of the mask (32 MiB at S = 16k for a mask that reads neither b nor h).
KEPT_SHAPES = 8
_TRANSFER_LOCK = threading.Lock()  # programs are lifted and transferred once, also when instances compile in threads
# Transferred programs by (reference, kv tile, spec name and path, spec identity, verify), the latest
# PROGRAMS_KEPT: a spec built again in this process (its file loaded again, the same hooks traced again) takes
# the first build's transfer, verification and lowerings, whatever its captured tensors' values.
PROGRAMS_KEPT = 64
_PROGRAMS: dict[tuple, "TransferredProgram"] = {}


def reference_source(reference: str) -> ReferenceSource:
    """The CUDA source the `reference` kernel (`sm90` or `sm80`) patches."""
    if reference not in REFERENCE_NAMES:
        raise InvalidInputError(f"unknown reference '{reference}': choose {' or '.join(REFERENCE_NAMES)}")
    return REFERENCES[f"attention_{reference}.cu"]


def reference_module(reference: str, head_dim: int = 128) -> ModuleOp:
    """The reference program (`sm90` or `sm80`) for `head_dim`'s kv tile, lifted from its CUDA source, every op
    located there. Lifts are made once per process: the module returned is shared and must not be changed
    (clone it)."""
    source = reference_source(reference)
    kernel, entries = LIFTED_PROGRAMS[reference]
    entry = entries.get(source.kv_tiles.get(head_dim))
    if entry is None:
        raise InvalidInputError(f"the {reference} reference has no program for head dim {head_dim}")
    return _lifted(kernel, entry)


@functools.cache
def _lifted(kernel: Path, entry: str) -> ModuleOp:
    from cubridge.frontends.cuda import lift_cuda_file

    return lift_cuda_file(kernel, entry).module


@dataclass(frozen=True)
class TransferredProgram:
    """A spec transferred onto one reference program: the variant the executor verifies (`transferred`), and
    what the lowering diffs it against (the reference, and each variant op -> the reference op it was cloned
    from: a lift's ops are not told apart by location alone)."""

    reference: ModuleOp
    transferred: ModuleOp
    pairs: dict[Operation, Operation]
    _lowerings: dict[tuple, LoweredKernel] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, spec: AttentionSpec, reference: ModuleOp) -> "TransferredProgram":
        transferred = reference.clone()
        pairs = cloned_pairs(transferred, reference)
        transfer_kernel(find_kernel(transferred), spec)
        return cls(reference, transferred, pairs)

    def lowered(self, name: str, instances: tuple[tuple[str, int], ...] | None = None) -> LoweredKernel:
        """The CUDA source of `instances` ((dtype, head dim) pairs; None: every one this program's kv tile
        serves), lowered once per program."""
        key = (name, instances)
        lowered = self._lowerings.get(key)
        if lowered is None:
            lowered = self._lowerings[key] = lower_module(self.reference, self.transferred, name, instances,
                                                          pairs=self.pairs)
        return lowered


@functools.cache
def _table_struct(args: tuple[tuple[str, str], ...]) -> type[ctypes.Structure]:
    """A ctypes mirror of the policy's `struct Args` of Table<T, R> members (one type per layout: making a
    ctypes type costs tens of microseconds)."""
    fields = []
    for name, kind in args:
        rank = int(kind.split(",")[1].strip(" >"))
        fields += [(f"{name}_data", ctypes.c_void_p), (f"{name}_dims", ctypes.c_int32 * rank)]
    return type("VariantArgs", (ctypes.Structure,), {"_fields_": fields})


@dataclass(frozen=True)
class VariantPlan:
    """A variant's launch for one problem layout (see VariantKernel.launch): the kernel's launch plan, and the
    Args tables in Args order, each (name, index of the captured tensor in the spec's captures; -1 for a block
    list or the mask bits)."""

    kernel: AttentionLaunch
    sources: tuple[tuple[str, int], ...]
    has_block_lists: bool
    uses_given_lists: bool  # the given lists (a BlockMask's) describe the problem in the kernel's tiles (no bits)
    mask_bits: bool  # the kernel takes the mask's bits (MASK_BITS: kMaskBits)
    shape: tuple[int, int, int, int]  # (B, HQ, SQ, SKV)
    lowered: LoweredKernel
    reads_capture_state: bool  # tables or a tile counter, made differently while a CUDA graph is captured
    # the kernel takes its tiles' order (kernel_inputs.tile_order): (the head chunk, the CTAs), else None
    tile_order: tuple[int, int] | None


@dataclass
class VariantKernel:
    """A spec's variant of one reference kernel; call it on [B, H, S, D] torch tensors.

    The spec is transferred onto the reference program of each kv tile size when a head dim first needs it
    (sm90: D 64 and 128 share the D = 128 lift, D = 256 has its own); `verify(spec, transferred module)`, when
    given, checks each program as it is transferred, before anything is lowered from it."""

    spec: AttentionSpec
    reference: str
    verify: Callable[[AttentionSpec, ModuleOp], None] | None = None
    progress: Callable[[str], AbstractContextManager] = nullcontext  # wraps each nvcc compilation, named
    _programs: dict[int, TransferredProgram] = field(default_factory=dict)  # by kv tile
    _instances: dict[tuple[str, int], tuple[LoweredKernel, CompiledKernel]] = field(default_factory=dict)
    _plans: dict[tuple, VariantPlan] = field(default_factory=dict)
    # (shape, tile, device, bits) -> (capture states, captured tensors, block lists and the mask's bits where the
    # kernel takes them), oldest first
    _block_lists: dict[tuple, tuple] = field(default_factory=dict)
    _table_copies: dict[str, tuple] = field(default_factory=dict)
    # id(plan) -> (plan, given lists, capture states, captured tensors, tables, tile order), oldest first
    _plan_tables: dict[int, tuple] = field(default_factory=dict)
    _given_expansion: tuple | None = None  # (given lists, (B, HQ), their expansion)

    def program(self, head_dim: int = 128) -> TransferredProgram:
        """The spec transferred onto the reference program of `head_dim`'s kv tile (made, and verified, once)."""
        kv_tile = reference_source(self.reference).kv_tiles.get(head_dim)
        with _TRANSFER_LOCK:
            if kv_tile not in self._programs:
                self._programs[kv_tile] = self._shared_program(kv_tile, head_dim)
        return self._programs[kv_tile]

    def _shared_program(self, kv_tile: int | None, head_dim: int) -> TransferredProgram:
        """The program of an earlier build of the same spec in this process, or a new one, transferred and
        verified now."""
        key = (self.reference, kv_tile, self.spec.name, self.spec.path, self.spec.identity(), self.verify)
        program = _PROGRAMS.get(key)
        if program is None:
            program = TransferredProgram.of(self.spec, reference_module(self.reference, head_dim))
            if self.verify is not None:
                self.verify(self.spec, program.transferred)
            _keep_recent(_PROGRAMS, key, program, PROGRAMS_KEPT)
        return program

    @property
    def transferred(self) -> ModuleOp:
        """The transferred program of D = 128 (and 64)."""
        return self.program().transferred

    def lowered(self, dtype: str = "bf16", head_dim: int = 128) -> LoweredKernel:
        """The variant's CUDA source for one instance (no compilation). One with K/V pair entry points is verified
        in that form first (`verify`, when given)."""
        lowered = self.program(head_dim).lowered(self.spec.name, ((dtype, head_dim),))
        if self.verify is not None:
            self.pair_program(head_dim)  # verified as it is made
        return lowered

    def pair_program(self, head_dim: int = 128) -> TransferredProgram | None:
        """The spec transferred onto the lift of the reference's K/V pair entry point (two-CTA clusters: relay
        warps, multicast panels, remote arrivals) where the variant's lowering has pair entry points for
        `head_dim`, else None; made (and checked by `verify`) once per spec in this process, so that the
        lowering's choice of pairs (every work tile of a head visits the same kv tiles) is verified with them."""
        # whether an instance runs in pairs depends on its head dim alone: the bf16 one's lowering (the one a
        # bf16 launch has made already) tells
        instances = self.program(head_dim).lowered(self.spec.name, (("bf16", head_dim),)).instances
        if not any(instance.pair_name for instance in instances):
            return None
        kv_tile = reference_source(self.reference).kv_tiles.get(head_dim)
        entry = PAIR_PROGRAMS[self.reference][kv_tile]
        key = (self.reference, kv_tile, self.spec.name, self.spec.path, self.spec.identity(), self.verify, "pairs")
        with _TRANSFER_LOCK:
            if key not in _PROGRAMS:
                pairs = TransferredProgram.of(self.spec, _lifted(LIFTED_PROGRAMS[self.reference][0], entry))
                if self.verify is not None:
                    self.verify(self.spec, pairs.transferred)
                _keep_recent(_PROGRAMS, key, pairs, PROGRAMS_KEPT)
        return _PROGRAMS[key]

    def compiled(self, dtype: str, head_dim: int, capability: tuple[int, int]) -> tuple[LoweredKernel, CompiledKernel]:
        """The lowered instance and its cubin, compiled once per process (and cached on disk by source text)."""
        key = (dtype, head_dim)
        if key not in self._instances:
            lowered = self.lowered(dtype, head_dim)
            with self.progress(f"compiling the {self.spec.name} variant for {dtype} D={head_dim} with nvcc"):
                compiled = compile_cubin(source_file(lowered), capability)
            if compiled.serialized_gemms:
                warnings.warn(f"the {self.spec.name} variant ({dtype}, D = {head_dim}): ptxas serialized the GEMMs of "
                              f"{'; '.join(compiled.serialized_gemms)}; it runs far below the reference kernel's speed",
                              SerializedGemmsWarning, stacklevel=2)
            self._instances[key] = (lowered, compiled)
        return self._instances[key]

    @functools.cached_property
    def head_dims(self) -> tuple[int, ...]:
        """The head dims this variant has instances for: those whose kv tile has a reference program."""
        source = reference_source(self.reference)
        kv_tiles = set(LIFTED_PROGRAMS[self.reference][1])
        return tuple(d for d, block_n in source.kv_tiles.items() if block_n in kv_tiles)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
                 return_lse: bool = False, **captured: torch.Tensor):
        unknown = set(captured) - set(self.spec.captures)
        if unknown:
            raise InvalidInputError(f"unknown captured tensor(s) {sorted(unknown)}; the spec captures "
                                    f"{sorted(self.spec.captures) or 'none'}")
        captures = [captured.get(name, tensor) for name, tensor in self.spec.captures.items()]
        check_tensors(q, k, v)
        return self.launch(layout_key(q, k, v), q, k, v, scale, return_lse, captures)

    def launch(self, layout: tuple, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None,
               return_lse: bool, captures: list[torch.Tensor], given: GivenBlockLists | None = None):
        """The call on tensors whose `layout_key` the caller computed, with the captured tensors in the spec's
        order and, optionally, block lists made elsewhere (`given`): used when they describe this problem on q's
        device in the kernel's tiles, else (and without them) the kernel's own lists are built, and cached per
        captured tensors and shape.

        The launch plan (checks, instance, grid, parameters, Args layout) is made once per layout of the
        inputs, scale, return_lse and captured and block-list shapes; a call then reads only the tensors' data:
        the latest call's tables are reused while its plan, captured tensors (objects, data, versions) and
        given lists are."""
        plan = self.plan_for(layout, q, k, v, scale, return_lse, captures, given)
        out, lse = self.run(plan, q, k, v, captures, given)
        return (out, lse) if return_lse else out

    def plan_for(self, layout: tuple, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None,
                 return_lse: bool, captures: list[torch.Tensor], given: GivenBlockLists | None = None) -> VariantPlan:
        """`launch`'s plan for these arguments: checked and made on their layout's first call."""
        if return_lse and self.spec.normalization != "softmax":
            raise InvalidInputError(f"return_lse: the {self.spec.normalization} normalization has no log-sum-exp")
        shapes = tuple([t.shape if isinstance(t, torch.Tensor) else None for t in captures]) if captures else ()
        key = (layout, scale, return_lse, None if given is None else given.signature, shapes)
        return planned(self._plans, key, self._plan, q, k, v, scale, return_lse, captures, given)

    def run(self, plan: VariantPlan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, captures: list[torch.Tensor],
            given: GivenBlockLists | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(out, lse or None) enqueued on torch's current stream, for arguments `plan_for` made `plan` for (the
        same layout, captured tensors' shapes and given lists' signature; their data may differ)."""
        stream = current_stream(plan.kernel.device_index)
        capturing = plan.reads_capture_state and stream_capturing(stream)
        tables, order = self._tables(plan, captures, given, capturing) if plan.sources else ((), None)
        return plan.kernel(q, k, v, stream, capturing, tables, order)

    # -- plans and inputs ------------------------------------------------------------------------------------

    def _plan(self, q, k, v, scale: float | None, return_lse: bool, captures: list[torch.Tensor],
              given: GivenBlockLists | None) -> VariantPlan:
        """Checks the inputs and the captured tensors' reads for this layout, and makes the launch plan."""
        for (name, expected), tensor in zip(self.spec.captures.items(), captures):
            if not isinstance(tensor, torch.Tensor) or tensor.dim() != expected.dim():
                raise InvalidInputError(f"captured tensor '{name}' must be a {expected.dim()}-D tensor")
        scale, device_index, capability = prepare_launch(q, k, v, scale, kernel=f"{self.spec.name} ({self.reference})",
                                                         head_dims=self.head_dims)
        self._check_arch(capability)
        bound = _with_captures(self.spec, dict(zip(self.spec.captures, captures)))
        try:
            bound.check_launch_shape(tuple(q.shape), tuple(k.shape), q.device)
        except CuBridgeError as error:
            raise InvalidInputError(str(error)) from None
        lowered, compiled = self.compiled(DTYPE_NAMES[q.dtype], q.shape[3], capability)
        shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        mask_bits = any(name == MASK_BITS for name, _ in lowered.args)
        # a kernel with bits takes its own lists: the bits follow the lists' order, and both come from one
        # materialization of the mask
        uses_given_lists = (given is not None and not mask_bits
                            and given.fit(shape, (lowered.tile_m, lowered.block_n), q.device))
        list_shapes = ({name: (*shape[:2], *t.shape[2:]) for name, t in zip(TABLES, given.lists)} if uses_given_lists
                       else block_list_shapes(shape, lowered.tile_m, lowered.block_n))
        capture_names = list(self.spec.captures)
        if mask_bits:
            planes = mask_planes(_with_captures(self.spec, dict(zip(capture_names, captures))).mask_on(q.device),
                                 shape, q.device)
            list_shapes = {**list_shapes, MASK_BITS: mask_bits_shape(planes, shape, lowered.tile_m, lowered.block_n)}
        args = _table_struct(lowered.args)()
        sources = [(name, -1 if name in list_shapes else capture_names.index(name)) for name, _ in lowered.args]
        for name, index in sources:
            getattr(args, f"{name}_dims")[:] = list(list_shapes[name] if index < 0 else captures[index].shape)
        fields = tuple(f"{name}_data" for name, _ in lowered.args)
        head_dim = q.shape[3]
        if self.reference == "sm90":
            instance = lowered.instances[0]
            # K/V pairs where the variant has them and the launch is one the reference would run in pairs
            pair_name = instance.pair_name if shares_kv_in_pairs(head_dim, False, q.shape[2]) else None
            function, cluster_ctas, resident_ctas = sm90_entry_point(
                compiled, instance.name, pair_name, sm90_shared_bytes(head_dim, lowered.block_n), lowered.threads,
                device_index)
            kernel = Sm90Launch(function, q, k, v, scale, return_lse, lowered.schedule == "dynamic", lowered.tile_m,
                                lowered.block_n, lowered.threads, args, fields, device_index, cluster_ctas,
                                resident_ctas)
        else:
            function = load_function(compiled, lowered.instances[0].name, device_index,
                                     sm80_host.shared_bytes(head_dim))
            kernel = Sm80Launch(function, q, k, v, scale, return_lse, lowered.tile_m, lowered.threads, args, fields,
                                device_index)
        has_block_lists = any(index < 0 for _, index in sources)
        order = ((kernel.params.head_chunk, kernel.plan.grid[0]) if lowered.takes_tile_order and has_block_lists
                 else None)
        return VariantPlan(kernel, tuple(sources), has_block_lists, uses_given_lists, mask_bits, shape, lowered,
                           bool(sources) or kernel.dynamic, order)

    def _check_arch(self, capability: tuple[int, int]) -> None:
        if self.reference == "sm90" and capability != (9, 0):
            raise UnsupportedArchError(f"the sm90 reference needs an sm_90 (Hopper) GPU; this one is "
                                       f"sm_{capability[0]}{capability[1]} (use reference='sm80')")
        if capability < (8, 0):
            raise UnsupportedArchError(f"the sm80 reference needs sm_80 or newer; this GPU is "
                                       f"sm_{capability[0]}{capability[1]}")

    def _tables(self, plan: VariantPlan, captures: list[torch.Tensor], given: GivenBlockLists | None,
                capturing: bool) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
        """The Args tables in Args order, on the plan's device: captured tensors' copies (f32 / i32), block
        lists (the given ones when they fit, else the kernel's own); and the work tiles' order made from the
        lists, where the kernel takes one. A plan's latest tables are reused while the given lists it takes and the
        captured tensors (objects, data, versions) are its call's; the entry keeps the tensors, so their ids
        stay theirs. While a CUDA graph is captured, every table is made inside it."""
        given = given if plan.uses_given_lists else None  # lists the plan does not take do not key its tables
        states = tuple([(id(t), t._version, t.data_ptr()) for t in captures])
        latest = self._plan_tables.get(id(plan))
        if not capturing and latest is not None and latest[0] is plan and latest[1] is given and latest[2] == states:
            return latest[4], latest[5]
        device = plan.kernel.device
        lists = None
        if plan.uses_given_lists:
            lists = self._given_tables(plan, given, capturing)
        elif plan.has_block_lists:
            lists = self._block_list_tables(plan, captures, states, capturing)
        tables = tuple([lists[name] if index < 0 else self._table_copy(name, captures[index], device, capturing)
                        for name, index in plan.sources])
        order = None
        if plan.tile_order is not None:
            order = tile_order(lists[NUM_BLOCKS], lists[FULL_NUM_BLOCKS], *plan.tile_order)
        if not capturing:
            _keep_recent(self._plan_tables, id(plan), (plan, given, states, captures, tables, order))
        return tables, order

    def _given_tables(self, plan: VariantPlan, given: GivenBlockLists, capturing: bool) -> dict[str, torch.Tensor]:
        """The given lists expanded to the plan's batch and heads, made again only for other lists (a new object)
        or another shape; while a CUDA graph is captured they are expanded inside it, so that replays follow the
        given tensors."""
        batch, heads = plan.shape[:2]
        latest = self._given_expansion
        if not capturing and latest is not None and latest[0] is given and latest[1] == (batch, heads):
            return latest[2]
        tables = given.expanded(batch, heads)
        if not capturing:
            self._given_expansion = (given, (batch, heads), tables)
        return tables

    def _table_copy(self, name: str, tensor: torch.Tensor, device: torch.device, capturing: bool) -> torch.Tensor:
        """The kernel's copy of a captured tensor, made again only when the tensor (the object, its data or its
        contents: its version counter) changed. Converting a CPU tensor on every call would be a synchronous copy
        that stalls the host until the GPU drains; while a CUDA graph is captured (`capturing`) the copy is made
        inside the graph, so that replays read the tensor's values at that time."""
        if capturing:
            return captured_table(tensor, device)
        cached = self._table_copies.get(name)
        if (cached is None or cached[0] is not tensor or cached[1] != tensor._version
                or cached[2] != tensor.data_ptr() or cached[3] != device):
            cached = self._table_copies[name] = (tensor, tensor._version, tensor.data_ptr(), device,
                                                 captured_table(tensor, device))
        return cached[4]

    def _block_list_tables(self, plan: VariantPlan, captures: list[torch.Tensor], states: tuple,
                           capturing: bool) -> dict[str, torch.Tensor]:
        """The kernel's block lists (and the mask's bits, where it takes them) for the plan's shape and these
        captured tensors (`states`: their ids, versions and data pointers) on the plan's device, made again only
        when one of the tensors changed: the entry keeps the tensors, so their ids stay theirs. Entries are kept
        per (shape, tile, device, bits) for the last KEPT_SHAPES made; head dims with other kv tiles (sm90: 192
        keys at D = 64) have other lists for the same shape."""
        tile_m, block_n = plan.lowered.tile_m, plan.lowered.block_n
        key = (plan.shape, (tile_m, block_n), plan.kernel.device, plan.mask_bits)
        # while a CUDA graph is captured, they are built inside it: a replay rebuilds them from the captured
        # tensors' values at that time (an entry cached before the capture would be frozen into it)
        cached = None if capturing else self._block_lists.get(key)
        if cached is not None and cached[0] == states:
            return cached[2]
        spec = _with_captures(self.spec, dict(zip(self.spec.captures, captures)))
        device = plan.kernel.device
        made = build_block_lists(spec.mask_on(device), plan.shape, tile_m, block_n, device, keep_on_device=True,
                                 mask_bits=plan.mask_bits)
        if not capturing:
            _keep_recent(self._block_lists, key, (states, captures, made))
        return made


def _keep_recent(entries: dict, key, value, limit: int = KEPT_SHAPES) -> None:
    """Stores `value` under `key` as the newest of `entries`, dropping the oldest beyond `limit`."""
    entries.pop(key, None)
    entries[key] = value
    if len(entries) > limit:
        del entries[next(iter(entries))]


def _with_captures(spec: AttentionSpec, captures: dict[str, torch.Tensor]) -> AttentionSpec:
    from dataclasses import replace

    return replace(spec, captures=captures)


def source_file(lowered: LoweredKernel) -> Path:
    """The lowered source written once under the cache directory, named by its text's hash."""
    digest = hashlib.sha256(lowered.source.encode()).hexdigest()[:32]
    directory = cache_dir() / "variants"
    path = directory / f"{lowered.reference.entry_prefix}_{lowered.variant}-{digest}.cu"
    if not path.is_file():
        write_atomically(path, lowered.source, make_directories=True)
    return path


def build_variant(spec: str | AttentionSpec, reference: str = "sm90",
                  verify: Callable[[AttentionSpec, ModuleOp], None] | None = None,
                  progress: Callable[[str], AbstractContextManager] = nullcontext) -> VariantKernel:
    """The spec's variant of the `reference` kernel (`sm90` or `sm80`): transferred (and checked by `verify`)
    and lowered now for D = 128, compiled per (dtype, head dim) on first call (each compilation in
    `progress(step)`); other kv tiles (sm90's D = 256) are transferred when first called."""
    spec = spec if isinstance(spec, AttentionSpec) else load_spec(spec)
    kernel = VariantKernel(spec, reference, verify, progress)
    kernel.lowered()  # transfer, verification and lowering errors surface here, not at the first call
    return kernel
