"""attention_sm80: the FlashAttention-2 style forward kernel of kernels/attention_sm80.cu, called on torch tensors."""

from __future__ import annotations

import abc
import ctypes
import functools
import math

import torch

from cubridge.runtime.compiler import KERNELS_DIR, CompiledKernel, compile_cubin
from cubridge.runtime.driver import (LAUNCH_LOCK, LaunchPlan, cuda_driver, current_stream, load_function,
                                     pointer_fields, stream_capturing, tile_counter)
from cubridge.runtime.errors import InvalidInputError, UnsupportedArchError

BLOCK_M = 128
THREADS = 128
STAGES = 2
BLOCK_N = {64: 64, 128: 64}
DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
SOURCE = KERNELS_DIR / "attention_sm80.cu"
_LOG2_E = 1.4426950408889634
# The `args` parameter of an instance whose policy takes no extra inputs (an empty struct: one byte).
NO_ARGS = ctypes.c_uint8(0)


class AttentionParams(ctypes.Structure):
    """Mirror of `struct AttentionParams` in attention_sm80.cu (same field order and types)."""

    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("q_stride_b", ctypes.c_int64), ("q_stride_h", ctypes.c_int64), ("q_stride_s", ctypes.c_int64),
        ("k_stride_b", ctypes.c_int64), ("k_stride_h", ctypes.c_int64), ("k_stride_s", ctypes.c_int64),
        ("v_stride_b", ctypes.c_int64), ("v_stride_h", ctypes.c_int64), ("v_stride_s", ctypes.c_int64),
        ("o_stride_b", ctypes.c_int64), ("o_stride_h", ctypes.c_int64), ("o_stride_s", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int32), ("seqlen_k", ctypes.c_int32),
        ("num_heads_q", ctypes.c_int32), ("num_heads_kv", ctypes.c_int32),
        ("scale", ctypes.c_float), ("scale_log2", ctypes.c_float),
    ]


def shared_bytes(head_dim: int) -> int:
    """Dynamic shared memory of one CTA: the Q tile plus STAGES K and V tiles, 2-byte elements."""
    return (BLOCK_M + 2 * STAGES * BLOCK_N[head_dim]) * head_dim * 2


def kernel_name(dtype: torch.dtype, head_dim: int, causal: bool) -> str:
    """extern "C" entry point of attention_sm80.cu for this dtype, head dim and mask."""
    return f"attention_sm80_{DTYPE_NAMES[dtype]}_d{head_dim}_{'causal' if causal else 'full'}"


def check_tensors(q, k, v) -> None:
    """InvalidInputError unless q, k, v are torch tensors (the per-call check before a plan is looked up)."""
    if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor):
        return
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise InvalidInputError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")


def layout_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    """Everything of q, k, v that validation and a launch plan read but the data: shapes, strides, dtypes,
    devices, and the data pointers' offsets from 16-byte alignment (together: a plan is made only for aligned
    ones, so any misaligned call misses and is validated)."""
    return (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, v.dtype,
            q.device, k.device, v.device, (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15)


def validate_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: str = "attention_sm80",
                    head_dims: tuple[int, ...] = tuple(BLOCK_N)) -> None:
    """InvalidInputError (one line) unless q, k, v are [B, H, S, D] bf16/fp16 tensors that the kernel takes:
    same dtype, D in `head_dims` (attention_sm80's: 64, 128), HQ a multiple of HKV, no empty dim, contiguous
    last dim, 16-byte aligned rows. `kernel` names the entry point in the messages."""
    check_tensors(q, k, v)
    tensors = {"q": q, "k": k, "v": v}
    for name, tensor in tensors.items():
        if tensor.dim() != 4:
            raise InvalidInputError(f"{name} must be 4-D [B, H, S, D]; got shape {tuple(tensor.shape)}")
        if tensor.dtype not in DTYPE_NAMES:
            raise InvalidInputError(f"{name} has dtype {tensor.dtype}; {kernel} takes bfloat16 or float16")
        if tensor.numel() == 0:
            raise InvalidInputError(f"{name} has an empty dim: shape {tuple(tensor.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise InvalidInputError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise InvalidInputError(f"k and v shapes differ: {tuple(k.shape)} vs {tuple(v.shape)}")
    if q.shape[0] != k.shape[0]:
        raise InvalidInputError(f"batch sizes differ: q has {q.shape[0]}, k/v have {k.shape[0]}")
    if q.shape[3] != k.shape[3]:
        raise InvalidInputError(f"head dims differ: q has {q.shape[3]}, k/v have {k.shape[3]}")
    head_dim = q.shape[3]
    if head_dim not in head_dims:
        raise InvalidInputError(f"head dim {head_dim} is not supported; {kernel} takes "
                                f"{', '.join(map(str, head_dims[:-1]))} or {head_dims[-1]}")
    if q.shape[1] % k.shape[1] != 0:
        raise InvalidInputError(f"query heads ({q.shape[1]}) must be a multiple of key/value heads ({k.shape[1]})")
    for name, tensor in tensors.items():
        if tensor.stride(3) != 1:
            raise InvalidInputError(
                f"{name} must have a contiguous last dim (stride 1); strides are {tuple(tensor.stride())}"
            )
        outer = zip(tensor.stride()[:3], tensor.shape[:3])
        if any(stride % 8 for stride, size in outer if size > 1) or tensor.data_ptr() % 16:
            raise InvalidInputError(
                f"{name} rows must be 16-byte aligned: data_ptr and B/H/S strides multiples of 8 elements; "
                f"strides are {tuple(tensor.stride())}"
            )


def validate_device(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """InvalidInputError unless q, k, v are CUDA tensors on one device."""
    if not q.device == k.device == v.device:
        raise InvalidInputError(f"q, k, v are on different devices: {q.device}, {k.device}, {v.device}")
    if q.device.type != "cuda":
        raise InvalidInputError(f"q, k, v must be CUDA tensors; they are on {q.device}")


@functools.cache
def _compiled(capability: tuple[int, int]) -> CompiledKernel:
    return compile_cubin(SOURCE, capability)


def prepare_launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None, kernel: str,
                   head_dims: tuple[int, ...] = tuple(BLOCK_N)) -> tuple[float, int, tuple[int, int]]:
    """Check the inputs (D in `head_dims`), the scale and the GPU for `kernel`; return (scale, device index,
    compute capability).

    The scale defaults to 1/sqrt(D). Raises a CuBridgeRuntimeError subclass on the first problem found.
    """
    validate_inputs(q, k, v, kernel=kernel, head_dims=head_dims)
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    if not scale > 0.0:
        raise InvalidInputError(f"scale must be positive (masked scores are -inf); got {scale}")
    validate_device(q, k, v)  # CUDA tensors: torch sees a GPU
    cuda_driver()
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    return scale, device_index, _capability(device_index)


@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    """The device's compute capability, queried once (the query costs microseconds per call)."""
    return torch.cuda.get_device_capability(device_index)


# Launch plans by everything they depend on but data pointers (bounded: cleared when full, like the other
# per-shape caches of the runtime).
PLAN_LIMIT = 256


def planned(plans: dict, key, make, *arguments):
    """The plan under `key` in the bounded `plans`; on a miss made by `make(*arguments)` and stored."""
    plan = plans.get(key)
    if plan is not None:
        return plan
    if len(plans) >= PLAN_LIMIT:
        plans.clear()
    plan = plans[key] = make(*arguments)
    return plan


class AttentionLaunch(abc.ABC):
    """A launch plan of an attention kernel for one (kernel, dtype, shapes, strides, scale, return_lse, device):
    the function, grid, block, shared memory, parameter structs with their constant fields and the Args struct
    (`args`, with its tables' dims; `table_fields` name their data pointers) are made once. A call allocates
    the outputs, writes the data pointers (tensors, tables, a tile counter under a dynamic schedule) into the
    parameters and enqueues the kernel. Subclasses write their parameter structs in `_point_at`."""

    dynamic = False  # whether the kernel claims tiles from a zeroed counter

    def __init__(self, q: torch.Tensor, return_lse: bool, args: ctypes.Structure | ctypes.c_uint8,
                 table_fields: tuple[str, ...], device_index: int):
        batch, heads_q, seqlen_q, _ = q.shape
        self.out_shape = tuple(q.shape)
        self.lse_shape = (batch, heads_q, seqlen_q) if return_lse else None
        self.dtype, self.device, self.device_index = q.dtype, q.device, device_index
        # out is q's shape, contiguous: allocated like q where q is contiguous (the plan's layout fixes it), which
        # costs the host about half of torch.empty's argument parsing (1.7 against 3.4 us, run 123)
        self._out_like_q = q.is_contiguous()
        self.args = args
        self._tables = pointer_fields(args, table_fields)
        self._tables_written = None  # the tables whose pointers `args` holds (kept: their ids stay theirs)
        self.plan: LaunchPlan | None = None  # set by the subclass

    def new_outputs(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """out [B, HQ, SQ, D] contiguous in q's dtype and, with return_lse, the fp32 LSE [B, HQ, SQ]; unwritten. `q`
        is of the plan's layout."""
        out = torch.empty_like(q) if self._out_like_q else torch.empty(self.out_shape, dtype=self.dtype,
                                                                       device=self.device)
        if self.lse_shape is None:
            return out, None
        return out, torch.empty(self.lse_shape, dtype=torch.float32, device=self.device)

    def enqueue(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(out, lse or None) on torch's current stream, for q, k, v of the plan's layout and no tables."""
        stream = current_stream(self.device_index)
        return self(q, k, v, stream, self.dynamic and stream_capturing(stream))

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, stream: int, capturing: bool = False,
                 tables: tuple[torch.Tensor, ...] = (), tile_order: torch.Tensor | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(out, lse or None), enqueued on `stream` (`capturing`: that stream is captured into a CUDA graph);
        `tables` are the Args tables in `table_fields` order, of the dims the plan was made for (a tuple passed
        again is not written again: a caller passes the same tuple only for the same tables at the same
        addresses); `tile_order` the order of the work tiles (`kernel_inputs.tile_order`), where the kernel takes
        one."""
        out, lse = self.new_outputs(q)
        with LAUNCH_LOCK:
            counter = tile_counter(self.device, self.device_index, stream, capturing) if self.dynamic else (None, None)
            if tables is not self._tables_written:  # a repeated call passes the same tuple
                for field, table in zip(self._tables, tables):
                    field.value = table.data_ptr()
                self._tables_written = tables
            self._point_at(q, k, v, out, lse, counter[0], tile_order)
            self.plan.launch(stream)
        return out, lse

    @abc.abstractmethod
    def _point_at(self, q, k, v, out, lse, counter: int | None, tile_order: torch.Tensor | None) -> None:
        """Writes the call's data pointers into the kernel's parameter structs (`counter`: the tile counter's
        address under a dynamic schedule, else None; `tile_order`: the tile order, or None for the kernel's
        own)."""


class Sm80Launch(AttentionLaunch):
    """A launch plan of an attention_sm80.cu kernel (the reference's or a variant's): one CTA per (query tile,
    head, batch)."""

    def __init__(self, function, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 return_lse: bool, tile_m: int, threads: int, args, table_fields: tuple[str, ...],
                 device_index: int):
        super().__init__(q, return_lse, args, table_fields, device_index)
        batch, heads_q, seqlen_q, head_dim = q.shape
        heads_kv, seqlen_k = k.shape[1], k.shape[2]
        out_strides = (heads_q * seqlen_q * head_dim, seqlen_q * head_dim, head_dim)  # contiguous
        self.params = AttentionParams(None, None, None, None, None, *q.stride()[:3], *k.stride()[:3],
                                      *v.stride()[:3], *out_strides, seqlen_q, seqlen_k, heads_q, heads_kv,
                                      scale, scale * _LOG2_E)
        self._pointers = pointer_fields(self.params, ("q", "k", "v", "o", "lse"))
        grid = (math.ceil(seqlen_q / tile_m), heads_q, batch)
        self.plan = LaunchPlan(function, grid, (threads, 1, 1), shared_bytes(head_dim), [self.params, args],
                               device_index)

    def _point_at(self, q, k, v, out, lse, counter, tile_order) -> None:
        q_field, k_field, v_field, out_field, lse_field = self._pointers
        q_field.value, k_field.value, v_field.value = q.data_ptr(), k.data_ptr(), v.data_ptr()
        out_field.value = out.data_ptr()
        lse_field.value = None if lse is None else lse.data_ptr()


_PLANS: dict[tuple, Sm80Launch] = {}


def attention_sm80(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: float | None = None, return_lse: bool = False):
    """softmax(scale * q k^T [+ top-left causal mask]) v for [B, H, S, D] tensors (GQA: HQ = g * HKV).

    Returns out [B, HQ, SQ, D] (contiguous, q's dtype) and, with return_lse, the natural-log log-sum-exp
    of the scaled scores, fp32 [B, HQ, SQ]. Causal is top-left aligned (query i sees keys j <= i), as torch
    SDPA's is_causal. Enqueued on torch's current stream; the tensors are ready when that stream reaches it.
    """
    check_tensors(q, k, v)
    out, lse = plan_sm80(layout_key(q, k, v), q, k, v, causal, scale, return_lse).enqueue(q, k, v)
    return (out, lse) if return_lse else out


def plan_sm80(layout: tuple, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None,
              return_lse: bool) -> Sm80Launch:
    """attention_sm80's launch plan for tensors whose `layout_key` the caller computed (checked and made on the
    layout's first call)."""
    return planned(_PLANS, (layout, causal, scale, return_lse), _sm80_plan, q, k, v, causal, scale, return_lse)


def _sm80_plan(q, k, v, causal: bool, scale: float | None, return_lse: bool) -> Sm80Launch:
    scale, device_index, capability = prepare_launch(q, k, v, scale, kernel="attention_sm80")
    if capability < (8, 0):
        raise UnsupportedArchError(
            f"attention_sm80 needs sm_80 or newer; {torch.cuda.get_device_name(device_index)} is "
            f"sm_{capability[0]}{capability[1]}"
        )
    head_dim = q.shape[3]
    function = load_function(_compiled(capability), kernel_name(q.dtype, head_dim, causal), device_index,
                             shared_bytes(head_dim))
    return Sm80Launch(function, q, k, v, scale, return_lse, BLOCK_M, THREADS, NO_ARGS, (), device_index)
