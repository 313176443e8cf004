// Verifiers and custom-syntax errors of the compute ops (cuir.gemm,
// cuir.gemm_async, cuir.map, cuir.gather, cuir.row_reduce, cuir.convert, cuir.fill).
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<128x32xbf16, @w>
    // gemm shape mismatch
    // CHECK: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm' abt: A is 64x64 but B gives K = 32
    %d = cuir.gemm abt %a, %b : !cuir.tile<64x64xbf16, @w>, !cuir.tile<128x32xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm' ab: result must be 64x128, got 64x64
    %d = cuir.gemm ab %a, %b : !cuir.tile<64x64xbf16, @w>, !cuir.tile<64x128xbf16, @w> -> !cuir.tile<64x64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<64x128xf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm': A and B element types differ (bf16 vs f16)
    %d = cuir.gemm ab %a, %b : !cuir.tile<64x64xbf16, @w>, !cuir.tile<64x128xf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    %acc = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm': accumulator type must equal the result type
    %d = cuir.gemm ab %a, %b acc %acc : !cuir.tile<64x64xbf16, @w>, !cuir.tile<64x128xbf16, @w>, !cuir.tile<64x128xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // bad layout
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:20: error: Expected `ab`, or `abt`.
    %d = cuir.gemm ba %a, %b : !cuir.tile<64x64xbf16, @w>, !cuir.tile<64x128xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 256 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %b = "test.op"() : () -> !cuir.tile<64x128xbf16, @other>
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm' runs in worker @w but its operand #1 belongs to worker @other
    %d = cuir.gemm ab %a, %b : !cuir.tile<64x64xbf16, @w>, !cuir.tile<64x128xbf16, @other> -> !cuir.tile<64x128xf32, @w>
  }
  cuir.worker @other threads 128 to 256 (%j) {
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:59: error: Expected ','
    %d = cuir.gemm ab %a, %b : !cuir.tile<64x64xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    %b = cuir.fill 0.0 : !cuir.tile<128x128xbf16, @w>
    // wrong memory space: B in registers
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_async' reads B from shared memory, but B is !cuir.tile<128x128xbf16, @w>
    %d, %t = cuir.gemm_async abt %a, %b : !cuir.tile<64x128xbf16, @w>, !cuir.tile<128x128xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: a register tile takes no stage index
    %d, %t = cuir.gemm_async abt %a[%c0], %ks[%c0] : !cuir.tile<64x128xbf16, @w>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: gemm A has a single stage and takes no stage index
    %d, %t = cuir.gemm_async abt %qs[%c0], %ks[%c0] : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: gemm B has 2 stages and needs one stage index, got 0
    %d, %t = cuir.gemm_async abt %qs, %ks : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %a = cuir.fill 0.0 : !cuir.tile<64x64xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_async' abt: A is 64x64 but B gives K = 128
    %d, %t = cuir.gemm_async abt %a, %ks[%c0] : !cuir.tile<64x64xbf16, @w>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_async' abt: result must be 64x128, got 128x128
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0] : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<128x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %acc = cuir.fill 0.0 : !cuir.tile<64x128xf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_async': accumulator type must equal the result type
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0] acc %acc : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.gemm_async' runs in worker @w but its result #0 belongs to worker @other
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0] : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @other>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 2]]:3: error: !cuir.rows<64xf32, @w> should be of base attribute cuir.tile
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0] : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.rows<64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:87: error: Expected ','
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:46: error: Expected ']'
    %d, %t = cuir.gemm_async abt %qs, %ks[%c0, %c0] : !cuir.smem<64x128xbf16, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map origin has one coordinate per index (2), got 1
    %p = cuir.map %s at [%c0] (%x: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // map body arity
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map body arguments must be one scalar per input followed by 2 index value(s): expected (f32, index, index)
    %p = cuir.map %s (%x: f32, %r: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map body arguments must be one scalar per input followed by 2 index value(s): expected (bf16, index, index)
    %p = cuir.map %s (%x: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xbf16, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // map yield type
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map yields f16 but the result holds f32
    %p = cuir.map %s (%x: f32, %r: index, %c: index) {
      %h = arith.truncf %x : f32 to f16
      cuir.yield %h : f16
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map body must end with cuir.yield of one value
    %p = cuir.map %s (%x: f32, %r: index, %c: index) {
      cuir.yield %x, %x : f32, f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map input #0 must be a row vector of 64
    %p = cuir.map %s (%x: f32, %r: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.rows<64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %t = cuir.fill 0.0 : !cuir.tile<64x64xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map input #1 is 64x64 but the result is 64x128
    %p = cuir.map %s, %t (%x: f32, %y: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w>, !cuir.tile<64x64xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %m = cuir.fill 0.0 : !cuir.rows<128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map input #1 has 128 rows, expected 64
    %p = cuir.map %s, %m (%x: f32, %y: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w>, !cuir.rows<128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %n = cuir.fill 0.0 : !cuir.cols<64xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map input #1 has 64 columns, expected 128
    %p = cuir.map %s, %n (%x: f32, %y: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w>, !cuir.cols<64xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.map input #1 must be a tile, row vector or column vector
    %p = cuir.map %s, %scale (%x: f32, %y: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w>, f32 -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.map' runs in worker @w but its result #0 belongs to worker @other
    %p = cuir.map %s (%x: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @other>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %m = cuir.fill 0.0 : !cuir.rows<64xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 3]]:9: error: expected 2 input types, got 1
    %p = cuir.map %s, %m (%x: f32, %y: f32, %r: index, %c: index) {
      cuir.yield %x : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:26: error: Expected `max`, or `sum`.
    %m = cuir.row_reduce min %s : !cuir.tile<64x128xf32, @w> -> !cuir.rows<64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // row_reduce length
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.row_reduce of a 64-row tile gives 64 values, not 128
    %m = cuir.row_reduce max %s : !cuir.tile<64x128xf32, @w> -> !cuir.rows<128xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %i0 = cuir.fill 0.0 : !cuir.rows<64xbf16, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.row_reduce init must have the result type
    %m = cuir.row_reduce sum %s init %i0 : !cuir.tile<64x128xf32, @w>, !cuir.rows<64xbf16, @w> -> !cuir.rows<64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 2]]:3: error: expected 1 operand types but had 0
    %m = cuir.row_reduce max %s : !cuir.tile<64x128xf32, @w>, !cuir.rows<64xf32, @w> -> !cuir.rows<64xf32, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: cuir.convert keeps the tile shape
    %b = cuir.convert %s : !cuir.tile<64x128xf32, @w> -> !cuir.tile<128x64xbf16, @w>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.convert' runs in worker @w but its result #0 belongs to worker @other
    %b = cuir.convert %s : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xbf16, @other>
  }
}

// -----

cuir.kernel @k(%scale: f32) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:5: error: 'cuir.fill' runs in worker @w but its result #0 belongs to worker @other
    %z = cuir.fill 0.0 : !cuir.tile<64x128xf32, @other>
  }
}

// -----

cuir.kernel @k(%lut: !cuir.global<2 x f32, row_major>) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>

  %c0 = arith.constant 0 : index
  // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:3: error: 'cuir.gather' must run inside a cuir.worker
  %v = cuir.gather %lut[%c0, %c0] : !cuir.global<2 x f32, row_major>
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k(%lut: !cuir.global<2 x f32, row_major>) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf32, @w>
    %p = cuir.map %s (%x: f32, %r: index, %c: index) {
      // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 1]]:7: error: gather source is a rank-2 global tensor and needs 2 coordinates, got 1
      %v = cuir.gather %lut[%r] : !cuir.global<2 x f32, row_major>
      cuir.yield %v : f32
    } : !cuir.tile<64x128xf32, @w> -> !cuir.tile<64x128xf32, @w>
  }
}

// -----

cuir.kernel @k(%lut: !cuir.global<2 x f32, row_major>) threads 128 smem 81920 cluster 1x1x1 tile_m 64 schedule grid {
  %qs = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
  %ks = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index

    %s = cuir.fill 0.0 : !cuir.tile<64x128xf16, @w>
    %p = cuir.map %s (%x: f16, %r: index, %c: index) {
      // CHECK-NEXT: {{.*}}invalid-compute.mlir:[[# @LINE + 2]]:7: error: result 'result' at position 0 does not verify:
      // CHECK-NEXT: attribute f32 expected from variable 'ELEMENT', but got f16
      %v = "cuir.gather"(%lut, %r, %c) : (!cuir.global<2 x f32, row_major>, index, index) -> f16
      cuir.yield %v : f16
    } : !cuir.tile<64x128xf16, @w> -> !cuir.tile<64x128xf16, @w>
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
