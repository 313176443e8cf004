// GPU check of the Hopper primitives (sm_90a): TMA loads (2-D and 4-D) completing on an mbarrier, wgmma
// with a K-major B (n = 64, Q K^T-like) and an MN-major B (n = 128, P V-like), alone and in a cluster, a TMA store,
// and named barriers with setmaxnreg between two warpgroups; the Hopper kernel's FMA-pipe exp2; and a deadlocked
// mbarrier wait for the wait timeout. The pytest tests compare the outputs with torch.
#include "cubridge/hopper.cuh"
#include "cubridge/math.cuh"
#include "cubridge/sync.cuh"

using namespace cubridge;

namespace {
constexpr int kTile = 64;
constexpr int kPanelBytes = kTile * kTile * 2;  // one [64][64] bf16 panel
}

// a_map: A [1, 1, 64, 64] bf16 (4-D, box = whole, SWIZZLE_128B); b_map: B [64 n][64 k] bf16 (SWIZZLE_128B);
// v_map: V [64 k][128 n] bf16, box [64 rows][64 cols] (SWIZZLE_128B); c_map: C [64][64] fp32, no swizzle.
// Outputs: C = A B^T through the TMA store; d_out [64][128] fp32 = A V written from the accumulators.
__device__ __forceinline__ void gemm_check(const CUtensorMap& a_map, const CUtensorMap& b_map, const CUtensorMap& v_map,
                                           const CUtensorMap& c_map, float* d_out) {
  extern __shared__ unsigned char shared_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(shared_raw) + 1023) & ~uintptr_t(1023));
  __nv_bfloat16* a_tile = reinterpret_cast<__nv_bfloat16*>(base);
  __nv_bfloat16* b_tile = reinterpret_cast<__nv_bfloat16*>(base + kPanelBytes);
  __nv_bfloat16* v_tile = reinterpret_cast<__nv_bfloat16*>(base + 2 * kPanelBytes);  // two panels
  float* c_tile = reinterpret_cast<float*>(base + 4 * kPanelBytes);
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + 4 * kPanelBytes + kTile * kTile * 4);

  const int thread = threadIdx.x;
  if (thread == 0) {
    mbarrier_init(bar, 1);
    fence_async_shared();
  }
  barrier();
  if (thread == 0) {
    mbarrier_expect_tx(bar, 4 * kPanelBytes);
    tma_load_4d(a_tile, &a_map, bar, 0, 0, 0, 0);
    tma_load_2d(b_tile, &b_map, bar, 0, 0);
    tma_load_2d(v_tile, &v_map, bar, 0, 0);
    tma_load_2d(reinterpret_cast<unsigned char*>(v_tile) + kPanelBytes, &v_map, bar, kTile, 0);
  }
  mbarrier_wait(bar, 0);

  float c_acc[32];
  float d_acc[64];
  gemm_fence();
  using T = __nv_bfloat16;
  gemm_async<64, 4, false, T>(c_acc, gemm_tile_address(a_tile), kPanelBytes, gemm_tile_address(b_tile), kPanelBytes,
                              false);
  gemm_async<128, 4, true, T>(d_acc, gemm_tile_address(a_tile), kPanelBytes, gemm_tile_address(v_tile), kPanelBytes,
                              false);
  gemm_wait<1>();  // C's group done; D's may still run
  const int warp = thread / 32;
  const int lane = thread % 32;
  for (int i = 0; i < 32; ++i) {
    const int row = warp * 16 + lane / 4 + ((i % 4) / 2) * 8;
    const int col = (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
    c_tile[row * kTile + col] = c_acc[i];
  }
  fence_async_shared();
  barrier();
  if (thread == 0) {
    tma_store_2d(&c_map, c_tile, 0, 0);
    store_async_commit();
    store_async_wait<0>();
  }
  gemm_wait<0>();
  for (int i = 0; i < 64; ++i) {
    const int row = warp * 16 + lane / 4 + ((i % 4) / 2) * 8;
    const int col = (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
    d_out[row * 2 * kTile + col] = d_acc[i];
  }
}

extern "C" __global__ void __launch_bounds__(128, 1)
    hopper_gemm_check(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                      const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap c_map,
                      float* d_out) {
  gemm_check(a_map, b_map, v_map, c_map, d_out);
}

// The same check in each CTA of a cluster of two, CTA r writing D to d_out + r * 64 * 128: a cluster CTA's shared
// addresses carry its rank, which the wgmma descriptors must not see.
extern "C" __global__ void __launch_bounds__(128, 1) __cluster_dims__(2, 1, 1)
    hopper_gemm_check_in_cluster(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                                 const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap c_map,
                                 float* d_out) {
  gemm_check(a_map, b_map, v_map, c_map, d_out + cluster_cta_rank() * 2 * kTile * kTile);
}

// Two warpgroups: the producer lowers its register budget, writes 128 values to shared memory and arrives
// on named barrier 1; the consumer raises its budget, waits on barrier 1 and copies the values to out[i]
// (expected: out[i] = 3 * i + 1).
extern "C" __global__ void __launch_bounds__(256, 1) named_barrier_check(int* out) {
  __shared__ int values[128];
  const int thread = threadIdx.x;
  if (thread < 128) {
    setmaxnreg_dec<40>();
    values[thread] = 3 * thread + 1;
    named_barrier_arrive(1, 256);
  } else {
    setmaxnreg_inc<232>();
    named_barrier_sync(1, 256);
    out[thread - 128] = values[thread - 128];
  }
}

// y[i] = fma_exp2(x[i]) for i < n.
extern "C" __global__ void fma_exp2_check(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fma_exp2(x[i]);
}

// sine[i] = accurate_sin(x[i]) and cosine[i] = accurate_cos(x[i]) for i < n.
extern "C" __global__ void accurate_sin_cos_check(const float* x, float* sine, float* cosine, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    sine[i] = accurate_sin(x[i]);
    cosine[i] = accurate_cos(x[i]);
  }
}

// Compile-only (never launched): instantiates the Hopper primitives the two checks above leave out, so
// ptxas sees every inline-asm string: fp16 wgmma at n = 64 and 128, MN-major n = 64, the 4-D TMA store,
// a plain mbarrier arrive.
extern "C" __global__ void __launch_bounds__(128, 1)
    hopper_compile_only(const __grid_constant__ CUtensorMap map_4d, float* out) {
  extern __shared__ unsigned char shared_raw[];
  __half* tile = reinterpret_cast<__half*>(shared_raw);
  uint64_t* bar = reinterpret_cast<uint64_t*>(shared_raw + 4 * kPanelBytes);
  mbarrier_arrive(bar);
  float narrow[32];
  float wide[64];
  gemm_fence();
  const uint32_t a_tile = gemm_tile_address(tile);
  const uint32_t b_tile = gemm_tile_address(tile + kTile * kTile);
  gemm_async<64, 4, false, __half>(narrow, a_tile, kPanelBytes, b_tile, kPanelBytes, false);
  gemm_async<64, 4, true, __half>(narrow, a_tile, kPanelBytes, b_tile, kPanelBytes, true);
  gemm_async<128, 4, false, __half>(wide, a_tile, kPanelBytes, b_tile, kPanelBytes, false);
  gemm_async<128, 4, true, __half>(wide, a_tile, kPanelBytes, b_tile, kPanelBytes, true);
  gemm_wait<0>();
  tma_store_4d(&map_4d, tile, 0, 0, 0, 0);
  store_async_commit();
  store_async_wait<0>();
  out[threadIdx.x] = narrow[threadIdx.x % 32] + wide[threadIdx.x % 64];
}

// A deadlock: every thread waits on an mbarrier that expects one arrival and gets none. Launched only from a
// build with a wait timeout (CUBRIDGE_WAIT_TIMEOUT), whose waits print the barrier and trap.
extern "C" __global__ void stuck_wait_check() {
  __shared__ uint64_t never_arrived;
  if (threadIdx.x == 0) {
    mbarrier_init(&never_arrived, 1);
    fence_async_shared();
  }
  __syncthreads();
  mbarrier_wait(&never_arrived, 0);
}
