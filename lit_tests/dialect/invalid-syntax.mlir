// Parse errors: unknown ops and types, malformed custom syntax. Each is one
// located line, reported where the bad text starts.
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:5: error: Operation cuir.frobnicate is not registered
    cuir.frobnicate
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // (xDSL reports an unregistered type after its name)
    // CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:38: error: 'cuir.vector' is not registered
    %t = cuir.fill 0.0 : !cuir.vector<64xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // a missing ':' before the type
    // CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:24: error: Expected ':'
    %t = cuir.fill 0.0 !cuir.tile<64x64xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:24: error: expected (q_tile, head, batch)
    cuir.for_each_tile (%t, %h) {
    }
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:45: error: expected cluster shape AxBxC
cuir.kernel @k() threads 128 smem 0 cluster 1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:45: error: expected cluster shape AxBxC
cuir.kernel @k() threads 128 smem 0 cluster 1x1xa tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:45: error: expected cluster shape AxBxC
cuir.kernel @k() threads 128 smem 0 cluster 2x2x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:45: error: expected cluster shape AxBxC
cuir.kernel @k() threads 128 smem 0 cluster 4 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %t = cuir.fill 0.0 : !cuir.tile<64x64xf32, @w>
    // CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 2]]:3: error: expected 1 operand types but had 0
    %s = cuir.gemm ab %t, %t : !cuir.tile<64x64xf32, @w>, !cuir.tile<64x64xf32, @w>, !cuir.tile<64x64xf32, @w> -> !cuir.tile<64x64xf32, @w>
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %a = arith.addi %i, %i : index
    // CHECK-NEXT: {{.*}}invalid-syntax.mlir:[[# @LINE + 1]]:21: error: values used but not defined: [%undefined]
    cuir.wait_group %undefined : !cuir.token<@w>
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
