// CuBridge device primitives for Hopper (sm_90a): TMA tile copies, mbarriers, wgmma, register budgets.
// One function per CuIR op; each comment says what the op does and what has completed when it returns.
// Build with -gencode=arch=compute_90a,code=sm_90a (wgmma and setmaxnreg need the "a" target).
//
// Shared-memory operands of wgmma use the 128-byte swizzle that TMA writes with CU_TENSOR_MAP_SWIZZLE_128B:
// a tile is a sequence of panels [rows][64] of 16-bit elements (128-byte rows, 8-row atoms of 1024 bytes),
// each panel 1024-byte aligned. Tensor maps are kernel parameters declared `const __grid_constant__
// CUtensorMap`; primitives take their address.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace cubridge {

__device__ __forceinline__ uint32_t smem_u32(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// cuir.fence_async_shared: fence.proxy.async.shared::cta (sm_90+). Returns once this thread's earlier generic
// shared-memory writes are ordered before later async-proxy accesses (TMA, wgmma); pair it with a
// barrier so that other threads' async operations see them.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// cuir.mbarrier_init: mbarrier.init.shared::cta.b64. Sets the barrier's expected arrival count, phase 0.
// Done when it returns for this thread; before other threads or TMA use the barrier, follow it with
// fence_async_shared() in this thread and a barrier().
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int arrival_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrival_count) : "memory");
}

// cuir.mbarrier_arrive: mbarrier.arrive.shared::cta.b64. Counts one arrival of this thread (release
// semantics for its earlier writes) and returns at once.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// cuir.mbarrier_expect_tx: mbarrier.arrive.expect_tx. Counts one arrival and raises the phase's expected
// transaction bytes by `bytes` (the TMA copies that will complete_tx on it); returns at once.
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

#ifdef CUBRIDGE_WAIT_TIMEOUT_NS
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
  return now;
}

// An mbarrier wait that ran past CUBRIDGE_WAIT_TIMEOUT_NS: names the barrier and the waiter, then ends the launch.
__device__ __noinline__ void mbarrier_wait_timed_out(uint64_t* bar, uint32_t phase) {
  printf("cubridge: mbarrier wait timed out after %llu ns: barrier at shared address 0x%x, phase parity %u, "
         "block (%d, %d, %d), thread %d\n",
         static_cast<unsigned long long>(CUBRIDGE_WAIT_TIMEOUT_NS), smem_u32(bar), phase, blockIdx.x, blockIdx.y,
         blockIdx.z, threadIdx.x);
  __trap();
}
#endif

#ifdef CUBRIDGE_PERTURB_WAITS_NS
// After a completed mbarrier wait, this thread sleeps a pseudo-random time below CUBRIDGE_PERTURB_WAITS_NS (hashed
// from the SM's cycle counter, the barrier and the block): warp groups and the CTAs of a cluster drift apart by up
// to microseconds at every wait, so that a wait the protocol lacks shows as wrong bits instead of hiding behind the
// usual lockstep timing.
__device__ __forceinline__ void sleep_after_wait(const uint64_t* bar) {
  uint32_t x = static_cast<uint32_t>(clock64()) ^ (smem_u32(bar) * 0x9E3779B9u) ^ (blockIdx.x * 0x85EBCA6Bu);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  __nanosleep(x % CUBRIDGE_PERTURB_WAITS_NS);
}
#endif

// cuir.mbarrier_wait: mbarrier.try_wait.parity in a loop. Returns once the phase with parity `phase`
// (0 or 1) completed: all arrivals counted and all expected transaction bytes landed (acquire semantics).
// Built with CUBRIDGE_WAIT_TIMEOUT_NS (the runtime defines it from $CUBRIDGE_WAIT_TIMEOUT, in seconds), a wait
// still pending after that long prints its barrier's shared address, the phase and the waiting block and thread,
// and traps: a deadlock fails its launch and names its barrier instead of hanging the GPU. Built with
// CUBRIDGE_PERTURB_WAITS_NS ($CUBRIDGE_PERTURB_WAITS), each thread then sleeps a while (sleep_after_wait).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t phase) {
  uint32_t done = 0;
#ifdef CUBRIDGE_WAIT_TIMEOUT_NS
  const uint64_t start = globaltimer_ns();
#endif
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(phase)
        : "memory");
#ifdef CUBRIDGE_WAIT_TIMEOUT_NS
    if (!done && globaltimer_ns() - start > CUBRIDGE_WAIT_TIMEOUT_NS) mbarrier_wait_timed_out(bar, phase);
#endif
  }
#ifdef CUBRIDGE_PERTURB_WAITS_NS
  sleep_after_wait(bar);
#endif
}

// cuir.copy_async (with mbarrier), 2-D: TMA tile load of the box at coordinates (c0 innermost, c1) of
// `tensor_map` into `smem` (1024-byte aligned for swizzled maps). Asynchronous: the bytes land and are
// counted on `bar` (complete_tx); they are readable once mbarrier_wait on that phase returns.
__device__ __forceinline__ void tma_load_2d(void* smem, const CUtensorMap* tensor_map, uint64_t* bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(smem_u32(smem)),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

// cuir.copy_async (with mbarrier), 4-D: as tma_load_2d for a 4-D map, e.g. [B, H, S, D] with coordinates
// (d, s, h, b).
__device__ __forceinline__ void tma_load_4d(void* smem, const CUtensorMap* tensor_map, uint64_t* bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(smem_u32(smem)),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

// cuir.store_async, 2-D: TMA tile store of `smem` to the box at (c0, c1) of `tensor_map`. Asynchronous;
// the source writes must be fenced first (fence_async_shared + barrier). Joins this thread's current bulk
// group: close it with store_async_commit and wait with store_async_wait.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* tensor_map, const void* smem, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   tensor_map),
               "r"(c0), "r"(c1), "r"(smem_u32(smem))
               : "memory");
}

// cuir.store_async, 4-D: as tma_store_2d for a 4-D map.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* tensor_map, const void* smem, int c0, int c1,
                                             int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
          tensor_map),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(smem))
      : "memory");
}

// cuir.store_async (commit): cp.async.bulk.commit_group. Closes this thread's pending TMA stores into one
// bulk group; returns at once.
__device__ __forceinline__ void store_async_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// cuir.store_async (wait): cp.async.bulk.wait_group.read N. Returns once at most kPending of this thread's
// bulk groups still read shared memory: the older groups' source tiles may be overwritten. Their writes to
// global memory complete by the end of the kernel.
template <int kPending>
__device__ __forceinline__ void store_async_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// A shared-memory tile as wgmma descriptors address it: its byte offset in this CTA's shared memory / 16 (14 bits:
// shared memory is under 256 KB). The offset is masked out of the shared address: in a thread-block cluster that
// address also carries the CTA's rank from bit 24, which unmasked lands in the descriptor's leading-byte-offset
// field and moves an MN-major operand's second panel (P V read the wrong V columns in cluster rank 1). Tiles start
// on 1024-byte atoms, so the tile `bytes` further on is at address + bytes / 16: a kernel converts its storage's
// base once and adds each tile's offset (one add a GEMM, where converting each tile's pointer puts four dependent
// instructions between a GEMM turn and its first wgmma).
constexpr uint32_t kSharedOffsetMask = (1u << 18) - 1;
__device__ __forceinline__ uint32_t gemm_tile_address(const void* tile) {
  return (smem_u32(tile) & kSharedOffsetMask) >> 4;
}

// Shared-memory matrix descriptor for wgmma, 128-byte swizzle: the tile's address (gemm_tile_address), leading
// and stride byte offsets (each encoded >> 4), layout type 1 (SWIZZLE_128B) in bits 62-63. The fields do not
// overlap, so they are added: the compiler folds the constant ones into the address's add.
__device__ __forceinline__ uint64_t make_smem_desc_sw128(uint32_t tile_address, uint32_t leading_bytes,
                                                         uint32_t stride_bytes) {
  return uint64_t(tile_address) + (uint64_t((leading_bytes >> 4) & 0x3FFF) << 16) +
         (uint64_t((stride_bytes >> 4) & 0x3FFF) << 32) + (uint64_t(1) << 62);
}

// The descriptor of the tile `bytes` past the one `desc` describes (bytes a multiple of 16): the start
// address sits in bits 0-13 as address >> 4, and any address inside shared memory (< 256 KB) keeps the sum
// inside that field. One add per k slice, where a fresh descriptor costs four integer instructions.
__device__ __forceinline__ uint64_t advance_smem_desc(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// cuir.gemm_fence: wgmma.fence. Returns once this warp's earlier register and shared-memory accesses
// are ordered before the wgmma.mma_async operations issued after it; required before the first wgmma
// that reads accumulators written by ordinary instructions.
__device__ __forceinline__ void gemm_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// One wgmma.mma_async m64nNk16 with fp32 accumulators, both operands from shared-memory descriptors. Each
// shape is written once and specialized for bf16 and fp16 (T and its PTX type name).
template <int kN, typename T>
struct Wgmma;

#define CUBRIDGE_WGMMA_N64(T, PTX) \
  template <> \
  struct Wgmma<64, T> { \
    template <int kTransB> \
    __device__ __forceinline__ static void issue(float (&acc)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
          "%32, %33, p, 1, 1, 0, %35;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]) \
          : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB)); \
    } \
  };
CUBRIDGE_WGMMA_N64(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_N64(__half, "f16")
#undef CUBRIDGE_WGMMA_N64

#define CUBRIDGE_WGMMA_N128(T, PTX) \
  template <> \
  struct Wgmma<128, T> { \
    template <int kTransB> \
    __device__ __forceinline__ static void issue(float (&acc)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
          "%64, %65, p, 1, 1, 0, %67;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63]) \
          : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB)); \
    } \
  };
CUBRIDGE_WGMMA_N128(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_N128(__half, "f16")
#undef CUBRIDGE_WGMMA_N128

#define CUBRIDGE_WGMMA_N80(T, PTX) \
  template <> \
  struct Wgmma<80, T> { \
    template <int kTransB> \
    __device__ __forceinline__ static void issue(float (&acc)[40], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n80k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, " \
          "%40, %41, p, 1, 1, 0, %43;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]) \
          : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB)); \
    } \
  };
CUBRIDGE_WGMMA_N80(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_N80(__half, "f16")
#undef CUBRIDGE_WGMMA_N80

#define CUBRIDGE_WGMMA_N160(T, PTX) \
  template <> \
  struct Wgmma<160, T> { \
    template <int kTransB> \
    __device__ __forceinline__ static void issue(float (&acc)[80], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n160k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, " \
          "%80, %81, p, 1, 1, 0, %83;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63]), "+f"(acc[64]), "+f"(acc[65]), "+f"(acc[66]), "+f"(acc[67]), "+f"(acc[68]), "+f"(acc[69]), "+f"(acc[70]), "+f"(acc[71]), "+f"(acc[72]), "+f"(acc[73]), "+f"(acc[74]), "+f"(acc[75]), "+f"(acc[76]), "+f"(acc[77]), "+f"(acc[78]), "+f"(acc[79]) \
          : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB)); \
    } \
  };
CUBRIDGE_WGMMA_N160(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_N160(__half, "f16")
#undef CUBRIDGE_WGMMA_N160

#define CUBRIDGE_WGMMA_N192(T, PTX) \
  template <> \
  struct Wgmma<192, T> { \
    template <int kTransB> \
    __device__ __forceinline__ static void issue(float (&acc)[96], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n192k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, " \
          "%96, %97, p, 1, 1, 0, %99;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63]), "+f"(acc[64]), "+f"(acc[65]), "+f"(acc[66]), "+f"(acc[67]), "+f"(acc[68]), "+f"(acc[69]), "+f"(acc[70]), "+f"(acc[71]), "+f"(acc[72]), "+f"(acc[73]), "+f"(acc[74]), "+f"(acc[75]), "+f"(acc[76]), "+f"(acc[77]), "+f"(acc[78]), "+f"(acc[79]), "+f"(acc[80]), "+f"(acc[81]), "+f"(acc[82]), "+f"(acc[83]), "+f"(acc[84]), "+f"(acc[85]), "+f"(acc[86]), "+f"(acc[87]), "+f"(acc[88]), "+f"(acc[89]), "+f"(acc[90]), "+f"(acc[91]), "+f"(acc[92]), "+f"(acc[93]), "+f"(acc[94]), "+f"(acc[95]) \
          : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB)); \
    } \
  };
CUBRIDGE_WGMMA_N192(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_N192(__half, "f16")
#undef CUBRIDGE_WGMMA_N192

// cuir.gemm_async: issues kKSlices wgmma.mma_async m64nNk16 (one warpgroup: acc[64 x kN] += A[64 x 16k]
// B[16k x kN]) and one wgmma.commit_group; returns at once, the accumulators stay in flight until
// gemm_wait. The tiles are given by their gemm_tile_address. A is K-major: panels [64 rows][64 k] of
// `a_panel_bytes` each. B is K-major ([kN rows][64 k] panels, `b_panel_bytes` apart along k) unless kBMnMajor,
// where B is [16k rows][64 n] panels `b_panel_bytes` apart along n (e.g. V for P V). accumulate = false
// overwrites acc with the product.
template <int kN, int kKSlices, bool kBMnMajor, typename T>
__device__ __forceinline__ void gemm_async(float (&acc)[kN / 2], uint32_t a_tile, uint32_t a_panel_bytes,
                                           uint32_t b_tile, uint32_t b_panel_bytes, bool accumulate) {
  constexpr uint32_t kAtomBytes = 1024;       // 8 rows x 128 bytes
  constexpr uint32_t kKSliceBytes = 32;       // 16 elements of one 128-byte row
  constexpr uint32_t kMnMajorSliceBytes = 2048;  // 16 rows x 128 bytes
  const uint64_t desc_a0 = make_smem_desc_sw128(a_tile, 16, kAtomBytes);
  const uint64_t desc_b0 = make_smem_desc_sw128(b_tile, kBMnMajor ? b_panel_bytes : 16, kAtomBytes);
#pragma unroll
  for (int slice = 0; slice < kKSlices; ++slice) {
    const uint32_t k_major_offset_a = (slice % 4) * kKSliceBytes + (slice / 4) * a_panel_bytes;
    const uint32_t offset_b = kBMnMajor ? slice * kMnMajorSliceBytes
                                        : (slice % 4) * kKSliceBytes + (slice / 4) * b_panel_bytes;
    Wgmma<kN, T>::template issue<kBMnMajor ? 1 : 0>(acc, advance_smem_desc(desc_a0, k_major_offset_a),
                                                    advance_smem_desc(desc_b0, offset_b),
                                                    (accumulate || slice > 0) ? 1 : 0);
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// One wgmma.mma_async m64nNk16 with fp32 accumulators, A from registers (the m64k16 A fragment: 4 packed
// 16-bit pairs per thread), B from a shared-memory descriptor of an MN-major tile (trans-b = 1). Specialized
// per shape for bf16 and fp16, as Wgmma.
template <int kN, typename T>
struct WgmmaRegA;

#define CUBRIDGE_WGMMA_REG_A_N64(T, PTX) \
  template <> \
  struct WgmmaRegA<64, T> { \
    __device__ __forceinline__ static void issue(float (&acc)[32], const uint32_t (&a)[4], uint64_t desc_b, \
                                                 int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
          "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]) \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)); \
    } \
  };
CUBRIDGE_WGMMA_REG_A_N64(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_REG_A_N64(__half, "f16")
#undef CUBRIDGE_WGMMA_REG_A_N64

#define CUBRIDGE_WGMMA_REG_A_N128(T, PTX) \
  template <> \
  struct WgmmaRegA<128, T> { \
    __device__ __forceinline__ static void issue(float (&acc)[64], const uint32_t (&a)[4], uint64_t desc_b, \
                                                 int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
          "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63]) \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)); \
    } \
  };
CUBRIDGE_WGMMA_REG_A_N128(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_REG_A_N128(__half, "f16")
#undef CUBRIDGE_WGMMA_REG_A_N128

#define CUBRIDGE_WGMMA_REG_A_N256(T, PTX) \
  template <> \
  struct WgmmaRegA<256, T> { \
    __device__ __forceinline__ static void issue(float (&acc)[128], const uint32_t (&a)[4], uint64_t desc_b, \
                                                 int scale_d) { \
      asm volatile( \
          "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" \
          "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX "." PTX " " \
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
          "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n" \
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63]), "+f"(acc[64]), "+f"(acc[65]), "+f"(acc[66]), "+f"(acc[67]), "+f"(acc[68]), "+f"(acc[69]), "+f"(acc[70]), "+f"(acc[71]), "+f"(acc[72]), "+f"(acc[73]), "+f"(acc[74]), "+f"(acc[75]), "+f"(acc[76]), "+f"(acc[77]), "+f"(acc[78]), "+f"(acc[79]), "+f"(acc[80]), "+f"(acc[81]), "+f"(acc[82]), "+f"(acc[83]), "+f"(acc[84]), "+f"(acc[85]), "+f"(acc[86]), "+f"(acc[87]), "+f"(acc[88]), "+f"(acc[89]), "+f"(acc[90]), "+f"(acc[91]), "+f"(acc[92]), "+f"(acc[93]), "+f"(acc[94]), "+f"(acc[95]), "+f"(acc[96]), "+f"(acc[97]), "+f"(acc[98]), "+f"(acc[99]), "+f"(acc[100]), "+f"(acc[101]), "+f"(acc[102]), "+f"(acc[103]), "+f"(acc[104]), "+f"(acc[105]), "+f"(acc[106]), "+f"(acc[107]), "+f"(acc[108]), "+f"(acc[109]), "+f"(acc[110]), "+f"(acc[111]), "+f"(acc[112]), "+f"(acc[113]), "+f"(acc[114]), "+f"(acc[115]), "+f"(acc[116]), "+f"(acc[117]), "+f"(acc[118]), "+f"(acc[119]), "+f"(acc[120]), "+f"(acc[121]), "+f"(acc[122]), "+f"(acc[123]), "+f"(acc[124]), "+f"(acc[125]), "+f"(acc[126]), "+f"(acc[127]) \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)); \
    } \
  };
CUBRIDGE_WGMMA_REG_A_N256(__nv_bfloat16, "bf16")
CUBRIDGE_WGMMA_REG_A_N256(__half, "f16")
#undef CUBRIDGE_WGMMA_REG_A_N256

// cuir.gemm_async, A in registers: issues kKSlices wgmma.mma_async m64nNk16 (acc[64 x kN] += A[64 x 16k]
// B[16k x kN]) and one wgmma.commit_group; returns at once. A is this thread's fragment of a 64 x 16k
// register tile, 4 packed pairs per k slice: a[4s + 0..3] = (row g, cols 2t..2t+1), (row g + 8, same),
// (row g, cols 8 + 2t..), (row g + 8, cols 8 + 2t..) of slice s (g = lane / 4, t = lane % 4, rows offset by
// 16 * warp). That is the fp32 accumulator layout of gemm_async packed pairwise, so a score tile converted
// with convert_pack feeds P V directly. B, given by its gemm_tile_address, is MN-major ([16k rows][64 n] panels
// `b_panel_bytes` apart along n, e.g. V). The A registers are read asynchronously: keep them unmodified until
// gemm_wait retires the group (gemm_fence_operand after the wait keeps the compiler from reusing them earlier).
template <int kN, int kKSlices, typename T>
__device__ __forceinline__ void gemm_async_rs(float (&acc)[kN / 2], const uint32_t (&a)[4 * kKSlices],
                                              uint32_t b_tile, uint32_t b_panel_bytes, bool accumulate) {
  constexpr uint32_t kAtomBytes = 1024;
  constexpr uint32_t kMnMajorSliceBytes = 2048;
  const uint64_t desc_b0 = make_smem_desc_sw128(b_tile, b_panel_bytes, kAtomBytes);
#pragma unroll
  for (int slice = 0; slice < kKSlices; ++slice) {
    const uint32_t a_slice[4] = {a[4 * slice], a[4 * slice + 1], a[4 * slice + 2], a[4 * slice + 3]};
    WgmmaRegA<kN, T>::issue(acc, a_slice, advance_smem_desc(desc_b0, slice * kMnMajorSliceBytes),
                            (accumulate || slice > 0) ? 1 : 0);
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Operand fence for register tiles that async wgmma reads or writes: an empty asm that claims to read and
// write every element. Placed after gemm_wait, it keeps the compiler from reading accumulators or reusing
// A-fragment registers before the wait; placed before gemm_async, from sinking their producers past it.
// Emits no instruction.
template <int kCount>
__device__ __forceinline__ void gemm_fence_operand(float (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(registers[i])::"memory");
}

template <int kCount>
__device__ __forceinline__ void gemm_fence_operand(uint32_t (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(registers[i])::"memory");
}

// cuir.gemm_wait: wgmma.wait_group N. Returns once at most kPending of this warpgroup's wgmma groups are
// in flight; the older groups' accumulators are readable and their shared-memory operands reusable.
template <int kPending>
__device__ __forceinline__ void gemm_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// cuir.gemm_wait (no group left pending), issued only once `after` is computed. ptxas issues a wgmma wait as early
// as its basic block allows, ahead of independent work that precedes it in the source; a warp-uniform branch on
// `after` ends the block there, so the wait follows the instructions that compute `after`. Both paths wait (the
// other one, for a NaN `after`, naps first so that the compiler cannot merge the two).
__device__ __forceinline__ void gemm_wait_after(float after) {
  if (__all_sync(0xffffffffu, after == after)) {
    gemm_wait<0>();
  } else {
    __nanosleep(0);
    gemm_wait<0>();
  }
}

// Worker register budget (raise): setmaxnreg.inc.sync.aligned. The warpgroup's per-thread register limit
// becomes kRegisters (multiple of 8, 24..256) when all its warps executed it. Needs a register cap at
// kernel entry (__launch_bounds__(threads, 1)) and each warpgroup role in its own branch.
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Worker register budget (lower): setmaxnreg.dec.sync.aligned, releasing registers to the other
// warpgroups of the CTA; effective when it returns in all the warpgroup's warps.
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Thread-block clusters (__cluster_dims__): cuir.cluster_rank, cuir.cluster_barrier, cuir.mbarrier_arrive with `cta`,
// cuir.copy_async with `multicast` (attention_sm90.cu's K/V pairs).

// This CTA's rank in its cluster (%cluster_ctarank).
__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// barrier.cluster arrive (release) and wait (acquire): returns once every thread of every CTA in the cluster
// arrived; their earlier shared-memory writes, remote ones included, are visible to this thread.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// fence.mbarrier_init.release.cluster: this thread's earlier mbarrier_init become visible to the cluster's other
// CTAs (their remote arrivals, their multicast copies' complete_tx) once a cluster_sync follows.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival on the barrier at `bar`'s shared offset in cluster CTA `cta` (mapa + mbarrier.arrive.shared::cluster),
// with the default semantics (release, CTA scope), waited for there with mbarrier_wait: as CUTLASS's cluster
// pipelines do (cluster scope would cost a MEMBAR.GPU per arrival and an L1 invalidate per wait). Returns at once.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t cta) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               ::"r"(smem_u32(bar)), "r"(cta) : "memory");
}

// tma_load_4d multicast: the box at (c0..c3) of `tensor_map` into `smem`'s offset in every CTA of `cta_mask`
// (bit i: cluster rank i), counted (complete_tx) on `bar`'s offset in each. Asynchronous, as tma_load_4d.
__device__ __forceinline__ void tma_load_4d_multicast(void* smem, const CUtensorMap* tensor_map, uint64_t* bar,
                                                      uint16_t cta_mask, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n"
               ::"r"(smem_u32(smem)), "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)),
                 "h"(cta_mask)
               : "memory");
}

}  // namespace cubridge
