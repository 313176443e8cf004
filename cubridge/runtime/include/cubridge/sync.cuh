// CuBridge device primitives: block-level synchronisation (barriers, named barriers); sm_80 and newer.
// One function per CuIR op; each comment says what the op does and what has completed when it returns.
#pragma once

namespace cubridge {

// cuir.barrier: __syncthreads. Returns once every thread of the block arrived; their earlier
// shared-memory writes (generic proxy) are visible to every thread of the block.
__device__ __forceinline__ void barrier() { __syncthreads(); }

// cuir.named_barrier_sync: bar.sync id, count. Returns once `thread_count` threads (a multiple of 32)
// arrived at hardware barrier `id` (1..15; 0 is __syncthreads'); orders their shared-memory accesses.
__device__ __forceinline__ void named_barrier_sync(int id, int thread_count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(thread_count) : "memory");
}

// cuir.named_barrier_arrive: bar.arrive id, count. Signals arrival at barrier `id` and returns at once
// (never waits); the threads that bar.sync on `id` with the same count are released when all arrived.
__device__ __forceinline__ void named_barrier_arrive(int id, int thread_count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(thread_count) : "memory");
}

}  // namespace cubridge
