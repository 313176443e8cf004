// A 64 x 128 score GEMM and a P V GEMM in flight together in a loop, with no register budget raised
// (setmaxnreg) beyond the default: ptxas has too few registers for the wgmma pipeline and serializes them
// (its "Potential Performance Loss" note). The compiler tests check that the cubin cache names the function.
#include "cubridge/hopper.cuh"
using namespace cubridge;
extern "C" __global__ void serialized_steps(float* out, int steps) {
  extern __shared__ __align__(1024) unsigned char tiles[];
  float s[64], o[64];
  uint32_t p[32];
  const uint32_t a = gemm_tile_address(tiles), b = gemm_tile_address(tiles + 16384);
  for (int e = 0; e < 64; ++e) o[e] = 0.f;
  for (int e = 0; e < 32; ++e) p[e] = 0u;
  for (int j = 0; j < steps; ++j) {
    gemm_fence_operand(s);
    gemm_fence_operand(o);
    gemm_fence();
    if (j == steps - 1)
      gemm_async<64, 4, false, __half>(reinterpret_cast<float(&)[32]>(s), a, 8192, b, 8192, false);
    else
      gemm_async<128, 4, false, __half>(s, a, 8192, b, 8192, false);
    gemm_async_rs<128, 8, __half>(o, p, b, 8192, true);
    gemm_wait<1>();
    gemm_fence_operand(s);
    for (int e = 0; e < 64; ++e) s[e] = __expf(s[e]);
    gemm_wait<0>();
    gemm_fence_operand(o);
    for (int e = 0; e < 32; ++e) p[e] = __float_as_uint(s[2 * e] + s[2 * e + 1]);
  }
  for (int e = 0; e < 64; ++e) out[threadIdx.x * 64 + e] = o[e];
}
