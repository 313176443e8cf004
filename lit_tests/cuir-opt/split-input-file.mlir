// With --split-input-file each `// -----` chunk is parsed and verified on its
// own, and diagnostics give the line in this file, not in the chunk.
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Without --verify-diagnostics every chunk still runs, as in mlir-opt: the
// errors go to stderr, the chunks that succeed to stdout, and the exit fails.
// RUN: not cuir-opt %s --split-input-file 2>%t.err | filecheck %s --check-prefix=PARTIAL
// RUN: filecheck %s --check-prefix=ERRORS --input-file %t.err
// With -o nothing is written unless every chunk succeeds.
// RUN: not cuir-opt %s --split-input-file -o %t.mlir 2>/dev/null
// RUN: not test -e %t.mlir
// Without --split-input-file the separators are comments: one module, whose
// first error (a parse error here) fails it.
// RUN: not cuir-opt %s 2>&1 | filecheck %s --check-prefix=WHOLE

cuir.kernel @ok() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK: {{^.*}}split-input-file.mlir:[[# @LINE + 2]]:5: error: 'cuir.gemm_fence' must run inside a cuir.worker
cuir.kernel @bad_op() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
    cuir.gemm_fence
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// Parse errors too.
cuir.kernel @bad_type() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{^.*}}split-input-file.mlir:[[# @LINE + 1]]:26: error: cuir.rows needs a positive length
    %r = cuir.fill 0.0 : !cuir.rows<0xf32, @w>
  }
}

// -----

// CHECK-NEXT: {{^.*}}split-input-file.mlir:[[# @LINE + 1]]:1: error: worker @w uses threads up to 256 but the kernel has 128
cuir.kernel @bad_kernel() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 256 (%i) {
  }
}

// -----

cuir.kernel @also_ok() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 256 (%i) {
  }
}

// The good chunks are printed, in order, with separators between all chunks.
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   cuir.kernel @ok() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
// CHECK:      // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   cuir.kernel @also_ok() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {

// PARTIAL:      builtin.module {
// PARTIAL-NEXT:   cuir.kernel @ok() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
// PARTIAL:      // -----
// PARTIAL-NEXT: // -----
// PARTIAL-NEXT: // -----
// PARTIAL-NEXT: // -----
// PARTIAL-NEXT: builtin.module {
// PARTIAL-NEXT:   cuir.kernel @also_ok() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {

// ERRORS-NOT: Traceback
// ERRORS:     {{^.*}}split-input-file.mlir:24:5: error: 'cuir.gemm_fence' must run inside a cuir.worker
// ERRORS-NEXT: {{^.*}}split-input-file.mlir:35:26: error: cuir.rows needs a positive length
// ERRORS-NEXT: {{^.*}}split-input-file.mlir:42:1: error: worker @w uses threads up to 256 but the kernel has 128
// ERRORS-NOT: {{.}}

// WHOLE-NOT: Traceback
// WHOLE:     {{^.*}}split-input-file.mlir:35:26: error: cuir.rows needs a positive length
// WHOLE-NOT: {{.}}
