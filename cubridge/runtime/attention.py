"""attention_sm80: the FlashAttention-2 style forward kernel of kernels/attention_sm80.cu, called on torch tensors."""

from __future__ import annotations

import ctypes
import functools
import math

import torch

from cubridge.runtime.compiler import KERNELS_DIR, CompiledKernel, compile_cubin
from cubridge.runtime.driver import cuda_driver, launch, load_function
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


# Input layouts already validated, by everything validate_inputs reads: a repeated call with tensors of the
# same shapes, strides, dtype and row alignment skips the checks (host time per call matters for short kernels).
_VALID_LAYOUTS: set[tuple] = set()
_VALID_LAYOUTS_LIMIT = 1024


def _layout(tensor: torch.Tensor) -> tuple:
    return tensor.shape, tensor.stride(), tensor.dtype, tensor.data_ptr() % 16


def validate_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: str = "attention_sm80",
                    head_dims: tuple[int, ...] = tuple(BLOCK_N)) -> None:
    """InvalidInputError (one line) unless q, k, v are [B, H, S, D] bf16/fp16 tensors that the kernel takes:
    same dtype, D in `head_dims` (attention_sm80's: 64, 128), HQ a multiple of HKV, no empty dim, contiguous
    last dim, 16-byte aligned rows. `kernel` names the entry point in the messages."""
    tensors = {"q": q, "k": k, "v": v}
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise InvalidInputError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    key = (_layout(q), _layout(k), _layout(v), head_dims)
    if key in _VALID_LAYOUTS:
        return
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
    if len(_VALID_LAYOUTS) >= _VALID_LAYOUTS_LIMIT:
        _VALID_LAYOUTS.clear()
    _VALID_LAYOUTS.add(key)


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


def empty_outputs(q: torch.Tensor, return_lse: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The kernels' outputs, unwritten: out [B, HQ, SQ, D] contiguous in q's dtype, and the fp32 LSE [B, HQ, SQ]
    when asked for (else None)."""
    batch, heads_q, seqlen_q, head_dim = q.shape
    out = q.new_empty((batch, heads_q, seqlen_q, head_dim))
    lse = q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32) if return_lse else None
    return out, lse


def attention_sm80(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: float | None = None, return_lse: bool = False):
    """softmax(scale * q k^T [+ top-left causal mask]) v for [B, H, S, D] tensors (GQA: HQ = g * HKV).

    Returns out [B, HQ, SQ, D] (contiguous, q's dtype) and, with return_lse, the natural-log log-sum-exp
    of the scaled scores, fp32 [B, HQ, SQ]. Causal is top-left aligned (query i sees keys j <= i), as torch
    SDPA's is_causal. Enqueued on torch's current stream; the tensors are ready when that stream reaches it.
    """
    scale, device_index, capability = prepare_launch(q, k, v, scale, kernel="attention_sm80")
    if capability < (8, 0):
        raise UnsupportedArchError(
            f"attention_sm80 needs sm_80 or newer; {torch.cuda.get_device_name(device_index)} is "
            f"sm_{capability[0]}{capability[1]}"
        )
    batch, heads_q, seqlen_q, head_dim = q.shape
    heads_kv, seqlen_k = k.shape[1], k.shape[2]
    out, lse = empty_outputs(q, return_lse)

    params = AttentionParams(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr() if return_lse else None,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
        seqlen_q, seqlen_k, heads_q, heads_kv, scale, scale * _LOG2_E,
    )
    smem = shared_bytes(head_dim)
    function = load_function(_compiled(capability), kernel_name(q.dtype, head_dim, causal), device_index, smem)
    grid = (math.ceil(seqlen_q / BLOCK_M), heads_q, batch)
    launch(function, grid, (THREADS, 1, 1), smem, [params, NO_ARGS], device_index)
    return (out, lse) if return_lse else out
