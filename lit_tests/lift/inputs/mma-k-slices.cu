#include "ampere-kernel.cuh"

// S = Q K^T over half of the head dimension: each register of `s` misses K slices 2 and 3.
template <typename T>
__device__ __forceinline__ void scores(const AttentionParams& p) {
  extern __shared__ unsigned char shared_raw[];
  T* q_tile = reinterpret_cast<T*>(shared_raw);
  T* k_tiles = q_tile + kBlockM * kHeadDim;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kBlockM;
  float s[1][kBlockN / 8][4];
  for (int nt = 0; nt < kBlockN / 8; ++nt)
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
  for (int ks = 0; ks < kHeadDim / 32; ++ks) {
    uint32_t a[4];
    uint32_t b[4];
    load_a_fragment<kHeadDim>(a, q_tile, warp * 16, ks * 16, lane);
    for (int np = 0; np < kBlockN / 16; ++np) {
      load_b_fragments<kHeadDim>(b, k_tiles, np * 16, ks * 16, lane);
      mma_16816<T>(s[0][2 * np], a, b[0], b[1]);
      mma_16816<T>(s[0][2 * np + 1], a, b[2], b[3]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) half_k(const AttentionParams p) {
  scores<__nv_bfloat16>(p);
}
