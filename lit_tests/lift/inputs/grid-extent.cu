#include "ampere-kernel.cuh"

// gridDim.x read for something other than the query tile's reversal.
template <typename T>
__device__ __forceinline__ void tiles(const AttentionParams& p) {
  const int last_row = gridDim.x * kBlockM;
  barrier();
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) extent(const AttentionParams p) {
  tiles<__nv_bfloat16>(p);
}
