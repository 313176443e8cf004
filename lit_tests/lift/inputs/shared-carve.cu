#include "ampere-kernel.cuh"

// K's tile is carved 64 elements past the end of Q's: the shared layout is not the profile's tiles end to end.
template <typename T>
__device__ __forceinline__ void carve(const AttentionParams& p) {
  extern __shared__ unsigned char shared_raw[];
  T* q_tile = reinterpret_cast<T*>(shared_raw);
  T* k_tiles = q_tile + kBlockM * kHeadDim + 64;
  barrier();
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) gap(const AttentionParams p) {
  carve<__nv_bfloat16>(p);
}
