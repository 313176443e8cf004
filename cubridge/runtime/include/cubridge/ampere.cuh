// CuBridge device primitives for Ampere-class tensor-core kernels (sm_80 and newer):
// cp.async tile copies, ldmatrix fragment loads, mma.sync, and register-tile stores.
// One function per CuIR op; each comment says what the op does and what has completed when it returns.
//
// Shared-memory tiles are row-major [rows][kCols] of 16-bit elements, kCols in {64, 128}, with the 16-byte
// chunks of each row XOR-swizzled by (row % 8). That places the 8 rows one ldmatrix phase reads, and the
// 8 rows a warp's fragment store writes, in 8 distinct bank groups: no bank conflicts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace cubridge {

// Element offset of (row, col) in a swizzled [rows][kCols] shared-memory tile.
template <int kCols>
__device__ __forceinline__ int swizzled_offset(int row, int col) {
  static_assert(kCols % 64 == 0, "swizzled tiles need at least 8 chunks of 16 bytes per row");
  const int chunk = (col >> 3) ^ (row & 7);
  return row * kCols + (chunk << 3) + (col & 7);
}

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// One 16-byte cp.async.cg; copies 0 source bytes (zero-fills all 16) when `in_range` is false.
__device__ __forceinline__ void copy_16_async(void* smem, const void* gmem, bool in_range) {
  const int source_bytes = in_range ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)), "l"(gmem),
               "r"(source_bytes)
               : "memory");
}

// cuir.copy_async (no mbarrier): each of kThreads threads issues 16-byte cp.async copies of the
// [kRows][kCols] tile whose row 0 starts at `gmem` (rows `row_stride` elements apart, last dim contiguous)
// into the swizzled tile `smem`; rows >= valid_rows are zero-filled. The copies are asynchronous: the
// data is in shared memory once this thread's group holding them is waited for (wait_group) and, for
// other threads' reads, after a barrier following that wait.
template <int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, int64_t row_stride, int valid_rows,
                                                int thread) {
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0, "tile does not split evenly");
  const int col = (thread % kChunksPerRow) * 8;
  const int first_row = thread / kChunksPerRow;
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = first_row + pass * kRowsPerPass;
    const bool in_range = row < valid_rows;
    const T* source = in_range ? gmem + row * row_stride + col : gmem;
    copy_16_async(smem + swizzled_offset<kCols>(row, col), source, in_range);
  }
}

// cuir.commit_group: cp.async.commit_group. Closes this thread's cp.async copies issued since the last
// commit into one group (possibly empty); returns at once.
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// cuir.wait_group: cp.async.wait_group N. Returns once at most kPending of this thread's committed groups
// are still in flight (all older groups have landed in shared memory).
template <int kPending>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ldmatrix.x4: four 8x8 16-bit matrices from shared memory; lane i supplies the address of row (i % 8)
// of matrix (i / 8). Returns with the fragments in registers.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&fragment)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(shared_address(smem_row)));
}

// ldmatrix.x4.trans: as ldmatrix_x4, each 8x8 matrix transposed on the way into registers.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&fragment)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(shared_address(smem_row)));
}

// cuir.load (A operand): ldmatrix.x4 of the 16x16 block at (row0, col0) of a swizzled [.][kCols] tile
// into the mma.sync m16n8k16 A fragment. Completes (registers valid) when it returns.
template <int kCols, typename T>
__device__ __forceinline__ void load_a_fragment(uint32_t (&a)[4], const T* tile, int row0, int col0, int lane) {
  const int row = row0 + (lane & 15);
  const int col = col0 + ((lane >> 4) << 3);
  ldmatrix_x4(a, tile + swizzled_offset<kCols>(row, col));
}

// cuir.load (B operand stored [n][k], e.g. K for Q K^T): ldmatrix.x4 of rows n0..n0+15, cols k0..k0+15 of
// a swizzled [.][kCols] tile. b[0], b[1] are the m16n8k16 B fragment of n-tile n0; b[2], b[3] of n0 + 8.
template <int kCols, typename T>
__device__ __forceinline__ void load_b_fragments(uint32_t (&b)[4], const T* tile, int n0, int k0, int lane) {
  const int row = n0 + (lane & 7) + ((lane >> 4) << 3);
  const int col = k0 + (((lane >> 3) & 1) << 3);
  ldmatrix_x4(b, tile + swizzled_offset<kCols>(row, col));
}

// cuir.load (B operand stored [k][n], e.g. V for P V): ldmatrix.x4.trans of rows k0..k0+15, cols
// n0..n0+15 of a swizzled [.][kCols] tile. b[0], b[1] are the B fragment of n-tile n0; b[2], b[3] of n0 + 8.
template <int kCols, typename T>
__device__ __forceinline__ void load_b_fragments_trans(uint32_t (&b)[4], const T* tile, int k0, int n0,
                                                       int lane) {
  const int row = k0 + (lane & 7) + (((lane >> 3) & 1) << 3);
  const int col = n0 + ((lane >> 4) << 3);
  ldmatrix_x4_trans(b, tile + swizzled_offset<kCols>(row, col));
}

// cuir.gemm: mma.sync.aligned.m16n8k16.row.col, 16-bit float inputs (T = __nv_bfloat16 or __half), fp32
// accumulate in place: acc += A(16x16) * B(16x8). The accumulator is valid when it returns.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                                  uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cuir.store (register tile -> shared): writes one packed pair of 16-bit values (accumulator columns col,
// col + 1 of `row`) into a swizzled [.][kCols] tile. Visible to other threads after a barrier.
template <int kCols, typename T>
__device__ __forceinline__ void store_pair_shared(T* tile, int row, int col, uint32_t packed) {
  *reinterpret_cast<uint32_t*>(tile + swizzled_offset<kCols>(row, col)) = packed;
}

// cuir.copy (shared tile -> global): each of kThreads threads copies 16-byte chunks of the swizzled
// [kRows][kCols] tile to global rows `row_stride` elements apart, skipping rows >= valid_rows. Complete
// for this thread when it returns (visible to later kernels on the stream once the kernel ends).
template <int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void store_tile_global(T* gmem, int64_t row_stride, int valid_rows, const T* tile,
                                                  int thread) {
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0, "tile does not split evenly");
  const int col = (thread % kChunksPerRow) * 8;
  const int first_row = thread / kChunksPerRow;
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = first_row + pass * kRowsPerPass;
    if (row < valid_rows) {
      *reinterpret_cast<uint4*>(gmem + row * row_stride + col) =
          *reinterpret_cast<const uint4*>(tile + swizzled_offset<kCols>(row, col));
    }
  }
}

}  // namespace cubridge
