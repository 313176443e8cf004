// Verifiers and custom-syntax errors of the synchronization ops.
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: 'cuir.barrier' must run inside a cuir.worker
  cuir.barrier
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: 'cuir.gemm_fence' must run inside a cuir.worker
  cuir.gemm_fence
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: 'cuir.fence_async_shared' must run inside a cuir.worker
  cuir.fence_async_shared
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.named_barrier_sync' thread count must be a positive multiple of 32, got 100
    cuir.named_barrier_sync %c1, 100
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.named_barrier_arrive' thread count must be a positive multiple of 32, got 0
    cuir.named_barrier_arrive %c1, 0
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>

  %c1 = arith.constant 1 : index
  // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: 'cuir.named_barrier_sync' must run inside a cuir.worker
  cuir.named_barrier_sync %c1, 128
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>

  // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: an mbarrier expects at least one arrival per phase
  cuir.mbarrier_init %b2, 0 : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.mbarrier_init' expects parent op 'cuir.kernel'
    cuir.mbarrier_init %b2, 1 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.mbarrier_arrive' barrier has 2 stages and needs one stage index, got 0
    cuir.mbarrier_arrive %b2 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>

  // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:3: error: 'cuir.mbarrier_arrive' must run inside a cuir.worker
  cuir.mbarrier_arrive %b1 : !cuir.mbarrier<1>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.mbarrier_expect_tx' barrier has a single stage and takes no stage index
    cuir.mbarrier_expect_tx %b1[%c0], 1024 : !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: cuir.mbarrier_expect_tx needs a positive byte count
    cuir.mbarrier_expect_tx %b2[%c0], 0 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: cuir.mbarrier_expect_tx needs a positive byte count
    cuir.mbarrier_expect_tx %b1, -16 : !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.mbarrier_wait' barrier has 2 stages and needs one stage index, got 0
    cuir.mbarrier_wait %b2, %c0 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:31: error: Expected ']'
    cuir.mbarrier_wait %b2[%c0, %c1], %c0 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:33: error: Expected ']'
    cuir.mbarrier_arrive %b2[%c0, %c1] : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:36: error: Expected ']'
    cuir.mbarrier_expect_tx %b2[%c0, %c1], 64 : !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.commit_group' runs in worker @w but its result #0 belongs to worker @other
    %t = cuir.commit_group : !cuir.token<@other>
  }
}

// -----

cuir.kernel @k() threads 256 smem 65560 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @producer threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %t = cuir.commit_group : !cuir.token<@producer>
  }
  cuir.worker @consumer threads 128 to 256 (%j) {
    %c0 = arith.constant 0 : index

    // a token waited by a worker that does not own it (SSA scoping keeps the
    // producer's own token out of reach; here an op unknown to CuIR hands it over)
    %t = "test.op"() : () -> !cuir.token<@producer>
    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.wait_group' runs in worker @consumer but its operand #0 belongs to worker @producer
    cuir.wait_group %t : !cuir.token<@producer>
  }
}

// -----

cuir.kernel @k() threads 256 smem 65560 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @producer threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %t = cuir.commit_group : !cuir.token<@producer>
  }
  cuir.worker @consumer threads 128 to 256 (%j) {
    %c0 = arith.constant 0 : index

    %t = "test.op"() : () -> !cuir.token<@producer>
    %s, %done = cuir.gemm_async abt %ks[%c0], %ks[%c0] : !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<128x128xf32, @consumer>
    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_wait' runs in worker @consumer but its operand #0 belongs to worker @producer
    cuir.gemm_wait %t : !cuir.token<@producer>
  }
}

// -----

cuir.kernel @k() threads 128 smem 24 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index

    %t = cuir.commit_group : !cuir.token<@w>
    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: cuir.gemm_wait waits on a gemm token, but this one comes from 'cuir.commit_group'
    cuir.gemm_wait %t : !cuir.token<@w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %t = cuir.commit_group : !cuir.token<@w>
    // a loop-carried token is followed to its definitions
    %last = scf.for %j = %c0 to %c1 step %c1 iter_args(%carried = %t) -> (!cuir.token<@w>) {
      scf.yield %carried : !cuir.token<@w>
    }
    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: cuir.gemm_wait waits on a gemm token, but this one comes from 'cuir.commit_group'
    cuir.gemm_wait %last : !cuir.token<@w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 8 cluster 1x1x1 tile_m 64 schedule grid {
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-sync.mlir:[[# @LINE + 1]]:5: error: a remote arrival needs a kernel cluster of more than one CTA
    cuir.mbarrier_arrive %b1 cta %c0 : !cuir.mbarrier<1>
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
