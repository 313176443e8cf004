// RUN: cuir-opt --lift --print-debuginfo %s 2>&1 | filecheck %s
//
// Ampere idioms on a small grid kernel (inputs/ampere-kernel.cuh): a fragment written through a `float&` to
// its element (the same variable, not a copy), every pair of a fragment stored into a shared tile (one
// cuir.store), and a tile copied to global memory at the coordinates its pointer's strides give, with the
// query tile in natural order (blockIdx.x).
#include "inputs/ampere-kernel.cuh"

template <typename T>
__device__ __forceinline__ void constant_tile(const AttentionParams& p) {
  extern __shared__ unsigned char shared_raw[];
  T* q_tile = reinterpret_cast<T*>(shared_raw);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kBlockM;
  T* o = static_cast<T*>(p.o) + blockIdx.z * p.o_stride_b + blockIdx.y * p.o_stride_h + m0 * p.o_stride_s;
  float s[1][kHeadDim / 8][4];
  for (int nt = 0; nt < kHeadDim / 8; ++nt)
    for (int e = 0; e < 4; ++e) {
      float& value = s[0][nt][e];
      value = 1.f;
      value += 1.f;
    }
  for (int half = 0; half < 2; ++half)
    for (int dt = 0; dt < kHeadDim / 8; ++dt)
      store_pair_shared<kHeadDim>(q_tile, warp * 16 + (lane >> 2) + half * 8, dt * 8 + (lane & 3) * 2,
                                  convert_pack<T>(s[0][dt][2 * half], s[0][dt][2 * half + 1]));
  barrier();
  store_tile_global<kBlockM, kHeadDim, kThreads>(o, p.o_stride_s, p.seqlen_q - m0, q_tile, threadIdx.x);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) twos(const AttentionParams p) {
  constant_tile<__nv_bfloat16>(p);
}

// CHECK: cuir.kernel @twos(%q: {{.*}}) threads 128 smem 8192 cluster 1x1x1 tile_m 64 schedule grid source "ampere-idioms.cu"
// CHECK: %q_tile = cuir.alloc : !cuir.smem<64x64xbf16, swizzle 128> loc(callsite("{{.*}}ampere-idioms.cu":12:3 at "{{.*}}ampere-idioms.cu":33:3))
// CHECK: cuir.worker @mma threads 0 to 128 (%group) {
// CHECK: cuir.for_each_tile (%q_tile_1, %head, %batch) {
// CHECK: %m0 = arith.muli %q_tile_1, %c64 : index loc(callsite("{{.*}}ampere-idioms.cu":15:18 at
// CHECK: %[[TWOS:.*]] = cuir.fill 2.0 : !cuir.tile<64x64xf32, @mma> loc(callsite("{{.*}}ampere-idioms.cu":26:7 at
// CHECK: %[[PACKED:.*]] = cuir.convert %[[TWOS]] : !cuir.tile<64x64xf32, @mma> -> !cuir.tile<64x64xbf16, @mma> loc(callsite("{{.*}}ampere-idioms.cu":27:35 at
// CHECK: cuir.store %[[PACKED]] -> %q_tile : {{.*}} loc(callsite("{{.*}}ampere-idioms.cu":26:7 at
// CHECK: cuir.barrier loc(callsite("{{.*}}ampere-idioms.cu":28:3 at
// CHECK: cuir.copy %q_tile -> %o[%batch, %head, %m0, %c0] : !cuir.smem<64x64xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided> loc(callsite("{{.*}}ampere-idioms.cu":29:3 at
