#include "ampere-kernel.cuh"

// One cp.async group committed, then a wait that leaves one group in flight: it waits for nothing.
template <typename T>
__device__ __forceinline__ void prologue(const AttentionParams& p) {
  extern __shared__ unsigned char shared_raw[];
  T* q_tile = reinterpret_cast<T*>(shared_raw);
  const int m0 = blockIdx.x * kBlockM;
  const T* q = static_cast<const T*>(p.q) + blockIdx.z * p.q_stride_b + blockIdx.y * p.q_stride_h + m0 * p.q_stride_s;
  load_tile_async<kBlockM, kHeadDim, kThreads>(q_tile, q, p.q_stride_s, p.seqlen_q - m0, threadIdx.x);
  commit_group();
  wait_group<1>();
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) early(const AttentionParams p) {
  prologue<__nv_bfloat16>(p);
}
