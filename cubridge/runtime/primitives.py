"""Which device primitive (include/cubridge/*.cuh) implements each CuIR op: the contract between the lifter
and the lowering. One row per primitive; an op with several rows has variants (operand layout, rank)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HEADER_DIR = Path(__file__).resolve().parent / "include" / "cubridge"


@dataclass(frozen=True)
class Primitive:
    op: str
    function: str  # C++ name in namespace cubridge
    ptx: str
    header: str  # file in include/cubridge/
    variant: str = ""
    inline_asm: bool = True  # False: plain CUDA C++ (intrinsics, loads/stores) that compiles to `ptx`


PRIMITIVES: tuple[Primitive, ...] = (
    Primitive("cuir.copy_async", "load_tile_async", "cp.async.cg.shared.global 16 B, src-size 0 = zero-fill",
              "ampere.cuh", "no mbarrier (Ampere); swizzled tile, rows past the end zero-filled"),
    Primitive("cuir.commit_group", "commit_group", "cp.async.commit_group", "ampere.cuh"),
    Primitive("cuir.wait_group", "wait_group", "cp.async.wait_group N", "ampere.cuh", "template <int N>"),
    Primitive("cuir.load", "load_a_fragment", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ampere.cuh",
              "A operand, m16n8k16"),
    Primitive("cuir.load", "load_b_fragments", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ampere.cuh",
              "B operand stored [n][k] (K in Q K^T)"),
    Primitive("cuir.load", "load_b_fragments_trans", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
              "ampere.cuh", "B operand stored [k][n] (V in P V)"),
    Primitive("cuir.gemm", "mma_16816", "mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32",
              "ampere.cuh", "template <typename T>, T = __nv_bfloat16 or __half"),
    Primitive("cuir.copy_async", "tma_load_2d", "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
              "mbarrier::complete_tx::bytes", "hopper.cuh", "with mbarrier (Hopper), 2-D map"),
    Primitive("cuir.copy_async", "tma_load_4d", "cp.async.bulk.tensor.4d.shared::cluster.global.tile."
              "mbarrier::complete_tx::bytes", "hopper.cuh", "with mbarrier (Hopper), 4-D map [B, H, S, D]"),
    Primitive("cuir.copy_async", "tma_load_4d_multicast", "cp.async.bulk.tensor.4d.shared::cluster.global.tile."
              "mbarrier::complete_tx::bytes.multicast::cluster", "hopper.cuh",
              "`multicast`: into every CTA of the cluster, each counted on its own barrier; 4-D map"),
    Primitive("cuir.store_async", "tma_store_2d", "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
              "hopper.cuh", "2-D map"),
    Primitive("cuir.store_async", "tma_store_4d", "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group",
              "hopper.cuh", "4-D map"),
    Primitive("cuir.commit_group", "store_async_commit", "cp.async.bulk.commit_group", "hopper.cuh",
              "group of TMA stores (cuir.store_async)"),
    Primitive("cuir.wait_group", "store_async_wait", "cp.async.bulk.wait_group.read N", "hopper.cuh",
              "group of TMA stores; template <int N>; waits until the stores have read their shared-memory source "
              "(global writes complete by the kernel's end)"),
    Primitive("cuir.mbarrier_init", "mbarrier_init", "mbarrier.init.shared::cta.b64", "hopper.cuh"),
    Primitive("cuir.mbarrier_arrive", "mbarrier_arrive", "mbarrier.arrive.shared::cta.b64", "hopper.cuh"),
    Primitive("cuir.mbarrier_arrive", "mbarrier_arrive_cluster",
              "mapa.shared::cluster.u32 + mbarrier.arrive.shared::cluster.b64", "hopper.cuh",
              "with `cta`: the barrier of a cluster CTA"),
    Primitive("cuir.mbarrier_expect_tx", "mbarrier_expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64",
              "hopper.cuh"),
    Primitive("cuir.mbarrier_wait", "mbarrier_wait", "mbarrier.try_wait.parity.shared::cta.b64 (loop)",
              "hopper.cuh"),
    Primitive("cuir.gemm_fence", "gemm_fence", "wgmma.fence.sync.aligned", "hopper.cuh"),
    Primitive("cuir.gemm_async", "gemm_async",
              "wgmma.mma_async.sync.aligned.m64n{64,80,128,160,192}k16.f32.{bf16,f16}.{bf16,f16} x K slices + "
              "wgmma.commit_group.sync.aligned", "hopper.cuh",
              "template <int N, int KSlices, bool BMnMajor, typename T>; 128B-swizzle smem descriptors of tiles given "
              "by `gemm_tile_address` (shared offset / 16, a cluster CTA's rank bits masked out: a kernel converts its "
              "storage's base once and adds tile offsets)"),
    Primitive("cuir.gemm_async", "gemm_async_rs",
              "wgmma.mma_async.sync.aligned.m64n{64,128,256}k16.f32.{bf16,f16}.{bf16,f16} (A in registers) x K slices "
              "+ wgmma.commit_group.sync.aligned", "hopper.cuh",
              "A = register tile (P in P V), B MN-major smem (by `gemm_tile_address`); "
              "template <int N, int KSlices, typename T>"),
    Primitive("cuir.gemm_async", "gemm_fence_operand", "(empty asm volatile, +f / +r on each register)",
              "hopper.cuh", "keeps async-wgmma register operands in place around issue and wait",
              inline_asm=False),
    Primitive("cuir.gemm_wait", "gemm_wait", "wgmma.wait_group.sync.aligned N", "hopper.cuh", "template <int N>"),
    Primitive("cuir.gemm_wait", "gemm_wait_after", "vote.sync.all + bra, then wgmma.wait_group.sync.aligned 0",
              "hopper.cuh", "no group left pending, issued after the instructions computing its float argument",
              inline_asm=False),
    Primitive("cuir.named_barrier_sync", "named_barrier_sync", "bar.sync id, count", "sync.cuh"),
    Primitive("cuir.named_barrier_arrive", "named_barrier_arrive", "bar.arrive id, count", "sync.cuh"),
    Primitive("cuir.worker", "setmaxnreg_inc", "setmaxnreg.inc.sync.aligned.u32", "hopper.cuh",
              "`regs` budget at worker entry, above the launch cap; template <int Registers>"),
    Primitive("cuir.worker", "setmaxnreg_dec", "setmaxnreg.dec.sync.aligned.u32", "hopper.cuh",
              "`regs` budget at worker entry, below the launch cap; template <int Registers>"),
    Primitive("cuir.barrier", "barrier", "bar.sync 0 (__syncthreads)", "sync.cuh", inline_asm=False),
    Primitive("cuir.cluster_barrier", "cluster_sync", "barrier.cluster.arrive.release + barrier.cluster.wait.acquire",
              "hopper.cuh"),
    Primitive("cuir.cluster_rank", "cluster_cta_rank", "mov.u32 %cluster_ctarank", "hopper.cuh"),
    Primitive("cuir.kernel", "fence_mbarrier_init_cluster", "fence.mbarrier_init.release.cluster", "hopper.cuh",
              "a cluster's: its mbarrier inits visible to the other CTAs (then `cluster_sync`)"),
    Primitive("cuir.fence_async_shared", "fence_async_shared", "fence.proxy.async.shared::cta", "hopper.cuh"),
    Primitive("cuir.row_reduce", "row_reduce_max", "2x shfl.sync.bfly + max over the lane quad", "math.cuh", "max",
              inline_asm=False),
    Primitive("cuir.row_reduce", "row_reduce_sum", "2x shfl.sync.bfly + add over the lane quad", "math.cuh", "sum",
              inline_asm=False),
    Primitive("cuir.convert", "convert_pack", "cvt.rn.{bf16x2,f16x2}.f32", "math.cuh",
              "template <typename T>; fp32 pair -> packed 16-bit pair"),
    Primitive("cuir.store", "store_pair_shared", "st.shared.b32", "ampere.cuh",
              "register accumulator pair -> swizzled shared tile", inline_asm=False),
    Primitive("cuir.copy", "store_tile_global", "ld.shared.v4 + st.global.v4 (row-guarded)", "ampere.cuh",
              "swizzled shared tile -> global rows", inline_asm=False),
    Primitive("math.exp2", "fast_exp2", "ex2.approx.ftz.f32", "math.cuh", "inside cuir.map"),
    Primitive("math.tanh", "fast_tanh", "tanh.approx.f32", "math.cuh", "inside cuir.map"),
    Primitive("math.sin", "accurate_sin", "3 fma.rn.f32 (x - k pi) + sin.approx.f32", "math.cuh", "inside cuir.map",
              inline_asm=False),
    Primitive("math.cos", "accurate_cos", "3 fma.rn.f32 (x - k pi) + cos.approx.f32", "math.cuh", "inside cuir.map",
              inline_asm=False),
)


# Ops that lower to plain C++ structure rather than a device primitive, and what they become.
PLAIN_CPP_OPS: dict[str, str] = {
    "cuir.kernel": "the `__global__` function, its `__launch_bounds__`, `__cluster_dims__` and dynamic shared-memory "
                   "size",
    "cuir.for_each_tile": "the tile-scheduler loop over (q_tile, head, batch); the producer hands each tile "
                          "index to the consumers through shared memory between two named barriers",
    "cuir.program_id": "`blockIdx.x`",
    "cuir.dim": "a size field of the kernel's parameter struct",
    "cuir.alloc": "a carve-out of the dynamic shared-memory block",
    "cuir.fill": "initialization of a register array",
    "cuir.map": "an unrolled loop over the thread's fragment elements; the body's arith/math ops",
    "cuir.yield": "the value the map body assigns back to the fragment element",
    "cuir.gather": "a read-only global load (`__ldg`) of the captured tensor at the computed index",
    "cuir.trap": "`__trap()`",
}


def primitives_for(op: str) -> tuple[Primitive, ...]:
    """Every primitive row for CuIR op `op` (empty when the op has none)."""
    return tuple(primitive for primitive in PRIMITIVES if primitive.op == op)


def markdown_table() -> str:
    """The mapping as a markdown table (op, function, PTX, header, variant)."""
    rows = ["| CuIR op | primitive | PTX | header | variant |", "|---|---|---|---|---|"]
    rows += [f"| `{p.op}` | `cubridge::{p.function}` | `{p.ptx}` | `{p.header}` | {p.variant} |" for p in PRIMITIVES]
    rows += [f"| `{op}` | plain C++ | | | {lowering} |" for op, lowering in PLAIN_CPP_OPS.items()]
    return "\n".join(rows)
