"""attention_sm90: the FlashAttention-3 style Hopper forward kernel of kernels/attention_sm90.cu, called on torch
tensors. The host builds the TMA tensor maps and launches a persistent grid of one CTA per SM."""

from __future__ import annotations

import ctypes
import functools
import math

import torch

from cubridge.runtime.attention import (DTYPE_NAMES, NO_ARGS, AttentionLaunch, check_tensors, layout_key,
                                        planned, prepare_launch)
from cubridge.runtime.compiler import KERNELS_DIR, CompiledKernel, compile_cubin
from cubridge.runtime.driver import LaunchPlan, load_function, max_active_clusters, pointer_fields
from cubridge.runtime.errors import UnsupportedArchError
from cubridge.runtime.tensor_map import TensorMapSlots

SOURCE = KERNELS_DIR / "attention_sm90.cu"
BLOCK_M = 128  # query rows per tile (two consumer warp groups of 64)
BLOCK_N = {64: 192, 128: 128, 256: 80}  # keys per kv tile of the entry points, by head dim
# Full masks at D = 128 take the _kv160 entry points (160-key kv tiles) from this many keys on: +0.8% at S_K = 8k
# and +2% at 16k, level at 4k (docs/performance.md run 211).
WIDE_BLOCK_N = 160
WIDE_MIN_SEQLEN_K = 8192
# With KV_PAIRS, full masks at D = 128 launch the _pairs entry points where a head's query tiles are even in number
# (and so do variants that have them: VariantKernel): clusters of two CTAs that run consecutive query tiles of one
# head and share their K and V loads (TMA multicast), so that each K and V byte leaves the L2 once per pair. Under
# sustained load at the power cap: +2.1% work per joule and 644 TFLOPS against 633 (FA4: 638); in bursts below the
# cap -0.3 to -0.7% (runs 227 and 236, H100; variants +0.8-1.9% and -0.3 to -0.9%, run 241; docs/performance.md).
KV_PAIRS = True
PAIR_CTAS = 2
CONSUMER_ROWS = 64
STAGES = 2
THREADS = 384  # producer warp group + two consumer warp groups
PANEL_COLS = 64  # 128-byte swizzle panels of 16-bit elements
BARRIERS = 2 + 4 * STAGES
TILE_SLOT_BYTES = 16  # the producer's hand-off of the current tile index
ALIGN_SLACK = 1024
MAX_HEAD_CHUNK = 8
CHUNK_L2_BYTES = 32 * 2**20  # K + V of one scheduler chunk should fit here (H100 / H200 L2: 50 MB)
_LOG2_E = 1.4426950408889634


class Sm90Params(ctypes.Structure):
    """Mirror of `struct AttentionParams` in attention_sm90.cu (same field order and types)."""

    _fields_ = [
        ("lse", ctypes.c_void_p), ("out", ctypes.c_void_p), ("tile_counter", ctypes.c_void_p),
        ("tile_order", ctypes.c_void_p),
        ("batch", ctypes.c_int32), ("num_heads_q", ctypes.c_int32), ("num_heads_kv", ctypes.c_int32),
        ("seqlen_q", ctypes.c_int32), ("seqlen_k", ctypes.c_int32), ("head_chunk", ctypes.c_int32),
        ("scale", ctypes.c_float), ("scale_log2", ctypes.c_float),
    ]


def shared_bytes(head_dim: int, block_n: int) -> int:
    """Dynamic shared memory of one CTA, as SharedLayout<D, kBlockKv>::kBytes: Q (two 64-row halves), STAGES K
    and V tiles of `block_n` keys, the O staging halves (none at D = 256: O is staged in Q's), the mbarriers, the
    tile slot and 1024 bytes to re-align the block."""
    q_half = CONSUMER_ROWS * head_dim * 2
    kv_tile = block_n * head_dim * 2
    o_halves = 0 if head_dim == 256 else 2 * q_half
    return 2 * q_half + 2 * STAGES * kv_tile + o_halves + BARRIERS * 8 + TILE_SLOT_BYTES + ALIGN_SLACK


def head_chunk(seqlen_k: int, head_dim: int, dynamic: bool, element_bytes: int = 2) -> int:
    """(head, batch) pairs the tile scheduler walks together. The static schedule (tiles of equal length) walks
    one pair at a time: the CTAs running together then read the K and V of one or two pairs, which stay in L2
    (run 107: +0.8-1.7% against chunks of 8 at S = 4k-16k). The dynamic one (causal tiles, longest first inside
    a chunk) takes as many as MAX_HEAD_CHUNK whose K and V fit in CHUNK_L2_BYTES, at least 1 (S = 8192, D = 128:
    8; S = 16384: 4; S = 32768: 2): its balance needs tiles of every length at once (chunks of 1 or 2 lost
    1.4-3.9% there)."""
    if not dynamic:
        return 1
    kv_bytes_per_head = 2 * seqlen_k * head_dim * element_bytes
    return max(1, min(MAX_HEAD_CHUNK, CHUNK_L2_BYTES // kv_bytes_per_head))


def kv_tile_keys(head_dim: int, causal: bool, seqlen_k: int) -> int:
    """Keys per kv tile of the entry point attention_sm90 launches for this head dim, mask and key length."""
    if head_dim == 128 and not causal and seqlen_k >= WIDE_MIN_SEQLEN_K:
        return WIDE_BLOCK_N
    return BLOCK_N[head_dim]


def shares_kv_in_pairs(head_dim: int, causal: bool, seqlen_q: int) -> bool:
    """Whether attention_sm90 launches the _pairs entry point (KV_PAIRS): full masks at D = 128 whose query tiles
    per head are even in number, so that the static schedule gives a pair consecutive tiles of one head."""
    return KV_PAIRS and head_dim == 128 and not causal and math.ceil(seqlen_q / BLOCK_M) % PAIR_CTAS == 0


def kernel_name(dtype: torch.dtype, head_dim: int, causal: bool, block_n: int | None = None,
                pairs: bool = False) -> str:
    """extern "C" entry point of attention_sm90.cu for this dtype, head dim, mask and kv tile (None: the head
    dim's BLOCK_N), in K/V pairs or not."""
    tile = "" if block_n in (None, BLOCK_N[head_dim]) else f"_kv{block_n}"
    mask = "causal" if causal else "full"
    return f"attention_sm90_{DTYPE_NAMES[dtype]}_d{head_dim}{tile}_{mask}{'_pairs' if pairs else ''}"


def tma_view(tensor: torch.Tensor) -> torch.Tensor:
    """The same elements with every size-1 dim's stride replaced by a TMA-legal one (a multiple of 16 bytes):
    a size-1 dim's stride never moves an address, but cuTensorMapEncodeTiled checks it anyway."""
    strides = list(tensor.stride())
    for dim in range(tensor.dim() - 2, -1, -1):
        if tensor.shape[dim] == 1:
            inner = strides[dim + 1] * tensor.shape[dim + 1]
            strides[dim] = max(8, -(-inner // 8) * 8)
    return tensor.as_strided(tensor.shape, strides)


def tensor_map_slots(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                     block_n: int) -> TensorMapSlots:
    """The kernel's tensor maps, in its parameter order: Q and O boxes [1, 1, 64, 64], K and V [1, 1, block_n
    (keys per kv tile), 64]."""
    q_box = (1, 1, CONSUMER_ROWS, PANEL_COLS)
    kv_box = (1, 1, block_n, PANEL_COLS)
    return TensorMapSlots([tma_view(tensor) for tensor in (q, k, v, out)], [q_box, kv_box, kv_box, q_box])


class Sm90Launch(AttentionLaunch):
    """A launch plan of an attention_sm90.cu kernel (the reference's or a variant's) with `block_n`-key kv tiles:
    a persistent grid of one CTA per SM, or of `resident_ctas` where fewer run at once (at most one per work tile;
    whole clusters of `cluster_ctas` for a kernel launched in clusters), tensor maps moved to each call's tensors,
    and under a `dynamic` schedule a zeroed tile counter per launch."""

    def __init__(self, function, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 return_lse: bool, dynamic: bool, tile_m: int, block_n: int, threads: int, args,
                 table_fields: tuple[str, ...], device_index: int, cluster_ctas: int = 1,
                 resident_ctas: int | None = None):
        super().__init__(q, return_lse, args, table_fields, device_index)
        self.dynamic = dynamic
        self.cluster_ctas = cluster_ctas
        batch, heads_q, seqlen_q, head_dim = q.shape
        heads_kv, seqlen_k = k.shape[1], k.shape[2]
        self.maps = tensor_map_slots(q, k, v, self.new_outputs(q)[0], block_n)
        self.params = Sm90Params(None, None, None, None, batch, heads_q, heads_kv, seqlen_q, seqlen_k,
                                 head_chunk(seqlen_k, head_dim, dynamic), scale, scale * _LOG2_E)
        self._lse, self._out, self._counter, self._order = pointer_fields(
            self.params, ("lse", "out", "tile_counter", "tile_order"))
        tiles = math.ceil(seqlen_q / tile_m) * heads_q * batch
        ctas = min(tiles, _sm_count(device_index) if resident_ctas is None else resident_ctas)
        ctas -= ctas % cluster_ctas  # whole clusters (K/V pairs: the tiles are even in number)
        self.plan = LaunchPlan(function, (ctas, 1, 1), (threads, 1, 1), shared_bytes(head_dim, block_n),
                               [*self.maps.maps, self.params, args], device_index)

    def _point_at(self, q, k, v, out, lse, counter, tile_order) -> None:
        self.maps.point_at((q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()))
        self._out.value = out.data_ptr()
        self._lse.value = None if lse is None else lse.data_ptr()
        self._counter.value = counter
        self._order.value = None if tile_order is None else tile_order.data_ptr()


@functools.cache
def _compiled(capability: tuple[int, int]) -> CompiledKernel:
    return compile_cubin(SOURCE, capability)


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


_PLANS: dict[tuple, Sm90Launch] = {}


def attention_sm90(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: float | None = None, return_lse: bool = False):
    """softmax(scale * q k^T [+ top-left causal mask]) v for [B, H, S, D] tensors (GQA: HQ = g * HKV) on a
    Hopper GPU (sm_90: wgmma, TMA, warp specialisation).

    Same contract as attention_sm80, with D = 256 besides 64 and 128: returns out [B, HQ, SQ, D] (contiguous,
    q's dtype) and, with return_lse, the natural-log log-sum-exp of the scaled scores, fp32 [B, HQ, SQ]. Causal
    is top-left aligned (query i sees keys j <= i). Enqueued on torch's current stream.
    """
    check_tensors(q, k, v)
    out, lse = plan_sm90(layout_key(q, k, v), q, k, v, causal, scale, return_lse).enqueue(q, k, v)
    return (out, lse) if return_lse else out


def plan_sm90(layout: tuple, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None,
              return_lse: bool) -> Sm90Launch:
    """attention_sm90's launch plan for tensors whose `layout_key` the caller computed (checked and made on the
    layout's first call)."""
    return planned(_PLANS, (layout, causal, scale, return_lse), _sm90_plan, q, k, v, causal, scale, return_lse)


def _sm90_plan(q, k, v, causal: bool, scale: float | None, return_lse: bool) -> Sm90Launch:
    scale, device_index, capability = prepare_launch(q, k, v, scale, kernel="attention_sm90",
                                                     head_dims=tuple(BLOCK_N))
    if capability != (9, 0):
        raise UnsupportedArchError(
            f"attention_sm90 needs an sm_90 (Hopper) GPU; {torch.cuda.get_device_name(device_index)} is "
            f"sm_{capability[0]}{capability[1]} (use attention_sm80)"
        )
    head_dim = q.shape[3]
    block_n = kv_tile_keys(head_dim, causal, k.shape[2])
    name = kernel_name(q.dtype, head_dim, causal, block_n)
    pair_name = (kernel_name(q.dtype, head_dim, causal, block_n, pairs=True)
                 if shares_kv_in_pairs(head_dim, causal, q.shape[2]) else None)
    function, cluster_ctas, resident_ctas = entry_point(_compiled(capability), name, pair_name,
                                                        shared_bytes(head_dim, block_n), THREADS, device_index)
    # Causal tiles differ in length: CTAs claim them from a counter (dynamic schedule). Full tiles are equal
    # and keep the static stride, with no counter to clear.
    return Sm90Launch(function, q, k, v, scale, return_lse, causal, BLOCK_M, block_n, THREADS, NO_ARGS, (),
                      device_index, cluster_ctas, resident_ctas)


def entry_point(compiled: CompiledKernel, name: str, pair_name: str | None, smem: int, threads: int,
                device_index: int):
    """The function to launch (the reference's or a variant's), its cluster size and how many of its CTAs run at
    once (None: one per SM): the K/V pairs' entry point `pair_name` where one is given (shares_kv_in_pairs) and the
    GPU runs at least one pair at once (its GPCs have two SMs free), as many pairs as it co-schedules (a static
    schedule's CTAs all start at once: no cluster waits for another to finish), else the unpaired `name`."""
    if pair_name is not None:
        pairs = load_function(compiled, pair_name, device_index, smem)
        clusters = max_active_clusters(pairs, (threads, 1, 1), smem, PAIR_CTAS)
        if clusters > 0:
            return pairs, PAIR_CTAS, min(_sm_count(device_index), PAIR_CTAS * clusters)
    return load_function(compiled, name, device_index, smem), 1, None
