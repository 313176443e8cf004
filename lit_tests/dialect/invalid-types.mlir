// Type verifiers (cubridge/dialect/types.py): one chunk per message. A bad
// type is reported at its first character.
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:20: error: a global tensor has rank >= 1
cuir.kernel @k(%g: !cuir.global<0 x f32, strided>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:42: error: Expected `strided`, or `row_major`.
cuir.kernel @k(%g: !cuir.global<2 x f32, tiled>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:20: error: unsupported element type index
cuir.kernel @k(%g: !cuir.global<2 x index, strided>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: a shared buffer is a 2-d tile with positive sizes, got [64]
  %s = cuir.alloc : !cuir.smem<64xbf16>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: a shared buffer is a 2-d tile with positive sizes, got [0, 64]
  %s = cuir.alloc : !cuir.smem<0x64xbf16>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: a shared buffer has at least one stage
  %s = cuir.alloc : !cuir.smem<64x64xbf16, stages 0>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: swizzle must be one of (0, 32, 64, 128) bytes, got 16
  %s = cuir.alloc : !cuir.smem<64x64xbf16, swizzle 16>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: unsupported element type index
  %s = cuir.alloc : !cuir.smem<64x64xindex>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:26: error: a register tile is 2-d with positive sizes, got [64, 64, 64]
    %t = cuir.fill 0.0 : !cuir.tile<64x64x64xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:26: error: register tile elements must be f32, bf16 or f16, got i32
    %t = cuir.fill 0.0 : !cuir.tile<64x64xi32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:26: error: cuir.rows needs a positive length
    %r = cuir.fill 0.0 : !cuir.rows<0xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:26: error: cuir.cols elements must be f32, bf16 or f16, got i16
    %c = cuir.fill 0.0 : !cuir.cols<64xi16, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:37: error: expected one dimension, e.g. 64xf32
    %r = cuir.fill 0.0 : !cuir.rows<64x2xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:21: error: an mbarrier array has at least one stage
  %b = cuir.alloc : !cuir.mbarrier<0>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-types.mlir:[[# @LINE + 1]]:49: error: a register tile is 2-d with positive sizes, got [64, 0]
    "cuir.fill"() <{value = 0.0 : f64}> : () -> !cuir.tile<64x0xf32, @w>
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
