// Verifiers and custom-syntax errors of the data-movement ops (cuir.alloc,
// cuir.copy, cuir.copy_async, cuir.load, cuir.store, cuir.store_async).
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: 'cuir.alloc' expects parent op 'cuir.kernel'
    %s = cuir.alloc : !cuir.smem<64x64xbf16>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.copy moves a tile between global and shared memory
    cuir.copy %x[%c0, %c0] -> %x[%c0, %c0] : !cuir.global<2 x f32, strided> -> !cuir.global<2 x f32, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.copy moves a tile between global and shared memory
    cuir.copy %s1 -> %s1 : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // global coordinate count
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy source is a rank-4 global tensor and needs 4 coordinates, got 2
    cuir.copy %q[%c0, %c0] -> %s1 : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy destination is a rank-4 global tensor and needs 4 coordinates, got 5
    cuir.copy %s1 -> %q[%c0, %c0, %c0, %c0, %c0] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // stage index missing
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy destination has 2 stages and needs one stage index, got 0
    cuir.copy %q[%c0, %c0, %c0, %c0] -> %s2 : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // stage index extra
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy source has a single stage and takes no stage index
    cuir.copy %s1[%c0] -> %q[%c0, %c0, %c0, %c0] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.copy: element types differ (f32 vs bf16)
    cuir.copy %x[%c0, %c0] -> %s1 : !cuir.global<2 x f32, strided> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>

  %c0 = arith.constant 0 : index
  // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:3: error: 'cuir.copy' must run inside a cuir.worker
  cuir.copy %q[%c0, %c0, %c0, %c0] -> %s1 : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x128xbf16, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy source is a rank-4 global tensor and needs 4 coordinates, got 3
    cuir.copy_async %q[%c0, %c0, %c0] -> %s1 : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy destination has a single stage and takes no stage index
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s1[%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy destination has 2 stages and needs one stage index, got 0
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2, barrier %b2[%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy barrier has 2 stages and needs one stage index, got 0
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2[%c0], barrier %b2 : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: copy barrier has a single stage and takes no stage index
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2[%c0], barrier %b1[%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.copy_async: element types differ (f32 vs bf16)
    cuir.copy_async %x[%c0, %c0] -> %s1 : !cuir.global<2 x f32, strided>, !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // only the generic form can give a barrier stage without a barrier
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: a barrier stage needs a barrier
    "cuir.copy_async"(%q, %c0, %c0, %c0, %c0, %s1, %c0) <{operandSegmentSizes = array<i32: 1, 4, 1, 0, 0, 1>}> : (!cuir.global<4 x bf16, strided>, index, index, index, index, !cuir.smem<64x128xbf16, swizzle 128>, index) -> ()
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 2]]:3: error: expected 0 operand types but had 1
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2[%c0], barrier %b2[%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 2]]:3: error: expected 1 operand types but had 0
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s1 : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>, !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:54: error: Expected ']'
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2[%c0, %c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:72: error: Expected ']'
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s2[%c0], barrier %b2[%c0, %c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // tile owned by another worker
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: 'cuir.load' runs in worker @w but its result #0 belongs to worker @other
    %t = cuir.load %s1 : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xbf16, @other>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: load source has 2 stages and needs one stage index, got 0
    %t = cuir.load %s2 : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xbf16, @w>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.load: shared buffer is [64, 128] but the tile is [128, 64]
    %t = cuir.load %s1 : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<128x64xbf16, @w>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.load: element types differ (bf16 vs f16)
    %t = cuir.load %s1 : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xf16, @w>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:27: error: Expected ']'
    %t = cuir.load %s2[%c0, %c0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xbf16, @w>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %r = cuir.fill 0.0 : !cuir.rows<64xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.store to shared memory takes a tile
    cuir.store %r -> %s1 : !cuir.rows<64xbf16, @w> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %t = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.store: tile is [64, 64] but the shared buffer is [64, 128]
    cuir.store %t -> %s1 : !cuir.tile<64x64xbf16, @w> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %r = cuir.fill 0.0 : !cuir.rows<64xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: store destination is a rank-2 global tensor and needs 2 coordinates, got 1
    cuir.store %r -> %x[%c0] : !cuir.rows<64xf32, @w> -> !cuir.global<2 x f32, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %t = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.store: element types differ (f32 vs bf16)
    cuir.store %t -> %s1 : !cuir.tile<64x128xf32, @w> -> !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %t = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: store destination has 2 stages and needs one stage index, got 0
    cuir.store %t -> %s2 : !cuir.tile<64x128xbf16, @w> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: store source has 2 stages and needs one stage index, got 0
    cuir.store_async %s2 -> %q[%c0, %c0, %c0, %c0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: store destination is a rank-4 global tensor and needs 4 coordinates, got 2
    cuir.store_async %s1 -> %q[%c0, %c0] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: cuir.store_async: element types differ (bf16 vs f32)
    cuir.store_async %s1 -> %x[%c0, %c0] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.global<2 x f32, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>, %x: !cuir.global<2 x f32, strided>) threads 128 smem 49176 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %s2 = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  %b2 = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:29: error: Expected ']'
    cuir.store_async %s2[%c0, %c0] -> %q[%c0, %c0, %c0, %c0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>) threads 128 smem 16392 cluster 1x1x1 tile_m 64 schedule grid {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: a multicast copy needs a kernel cluster of more than one CTA
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s1, barrier %b1 multicast : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>, !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>) threads 128 smem 16392 cluster 2x1x1 tile_m 64 schedule persistent {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %b1 = cuir.alloc : !cuir.mbarrier<1>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: a panel of 128 columns of a stage 128 wide
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s1, barrier %b1 columns 128 : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>, !cuir.mbarrier<1>
  }
}

// -----

cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>) threads 128 smem 16392 cluster 2x1x1 tile_m 64 schedule persistent {
  %s1 = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-data.mlir:[[# @LINE + 1]]:5: error: a multicast copy is a TMA copy: it needs a barrier
    cuir.copy_async %q[%c0, %c0, %c0, %c0] -> %s1 multicast : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
