// Compile-only (never launched): calls every Ampere-class and math primitive once, in both 16-bit types
// and both tile widths, so ptxas checks each inline-asm string for sm_80 and sm_90a.
#include "cubridge/ampere.cuh"
#include "cubridge/math.cuh"
#include "cubridge/sync.cuh"

using namespace cubridge;

template <typename T, int kCols>
__device__ void exercise(const T* gmem, T* gmem_out, float* values) {
  __shared__ __align__(128) T tile[64 * kCols];
  const int lane = threadIdx.x % 32;
  load_tile_async<64, kCols, 128>(tile, gmem, kCols, 50, threadIdx.x);
  commit_group();
  wait_group<0>();
  barrier();
  uint32_t a[4], b[4], bt[4];
  load_a_fragment<kCols>(a, tile, 0, 0, lane);
  load_b_fragments<kCols>(b, tile, 16, 16, lane);
  load_b_fragments_trans<kCols>(bt, tile, 32, 0, lane);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  mma_16816<T>(acc, a, b[0], bt[1]);
  const float row_max = row_reduce_max(acc[0]);
  const float row_sum = row_reduce_sum(fast_exp2(acc[1] - row_max) + fast_tanh(acc[2]));
  barrier();
  store_pair_shared<kCols>(tile, lane / 4, (lane % 4) * 2, convert_pack<T>(row_sum, acc[3]));
  barrier();
  store_tile_global<64, kCols, 128>(gmem_out, kCols, 40, tile, threadIdx.x);
  values[threadIdx.x] = row_sum;
}

extern "C" __global__ void __launch_bounds__(128) ampere_compile_only(const __nv_bfloat16* bf16_in,
                                                                      __nv_bfloat16* bf16_out,
                                                                      const __half* fp16_in, __half* fp16_out,
                                                                      float* values) {
  exercise<__nv_bfloat16, 64>(bf16_in, bf16_out, values);
  exercise<__nv_bfloat16, 128>(bf16_in, bf16_out, values);
  exercise<__half, 64>(fp16_in, fp16_out, values);
  exercise<__half, 128>(fp16_in, fp16_out, values);
  named_barrier_sync(1, 128);
  named_barrier_arrive(2, 128);
}
