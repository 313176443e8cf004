// RUN: cuir-opt --lift --print-debuginfo %s 2>&1 | filecheck %s
//
// A `#pragma unroll` between a brace-less `for` header and its body (tree-sitter-cuda 0.21.2 would drop the
// body): all four barriers are lifted, each at its line. A helper's ops keep the call site.
#include "cubridge/sync.cuh"
#include "cubridge/variant.cuh"

namespace {
using namespace cubridge;

constexpr int kBlockM = 64;

__device__ __forceinline__ void turn(int id) { named_barrier_sync(id, 128); }

struct TileScheduler {
  int first() const { return 0; }
  int next(int linear) const { return linear + 1; }
  bool valid(int linear) const { return linear < 1; }
  WorkTile decode(int linear) const { return WorkTile{0, 0, 0}; }
  bool dynamic() const { return false; }
};

template <typename T>
__device__ __forceinline__ void role_mainloop() {
  const TileScheduler scheduler{};
  int linear = scheduler.first();
  for (int tile_count = 0;; ++tile_count) {
    if (tile_count > 0) linear = scheduler.next(linear);
    if (!scheduler.valid(linear)) break;
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) named_barrier_arrive(1 + 2 * i + j, 128);
    turn(5);
  }
}
}  // namespace

extern "C" __global__ void __launch_bounds__(128, 1) pragma_kernel(const __grid_constant__ CUtensorMap q_map) {
  if (threadIdx.x / 128 == 0) role_mainloop<__nv_bfloat16>();
}

// CHECK: note: lifting entry point pragma_kernel, the first of 1 in pragma-and-inlining.cu
// CHECK: cuir.worker @role threads 0 to 128
// CHECK: cuir.for_each_tile
// CHECK-NEXT: cuir.named_barrier_arrive %c1, 128 loc(callsite("{{.*}}pragma-and-inlining.cu":32:35 at "{{.*}}pragma-and-inlining.cu":39:31))
// CHECK-NEXT: cuir.named_barrier_arrive %c2, 128 loc(callsite("{{.*}}pragma-and-inlining.cu":32:35 at
// CHECK-NEXT: cuir.named_barrier_arrive %c3, 128 loc(callsite("{{.*}}pragma-and-inlining.cu":32:35 at
// CHECK-NEXT: cuir.named_barrier_arrive %c4, 128 loc(callsite("{{.*}}pragma-and-inlining.cu":32:35 at
// CHECK-NEXT: cuir.named_barrier_sync %c5, 128 loc(callsite("{{.*}}pragma-and-inlining.cu":13:48 at callsite("{{.*}}pragma-and-inlining.cu":33:5 at "{{.*}}pragma-and-inlining.cu":39:31)))
