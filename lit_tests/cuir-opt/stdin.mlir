// Input from stdin, as `-` or with no input file; diagnostics name it <stdin>.
// RUN: cat %S/inputs/small.mlir | cuir-opt - | filecheck %s
// RUN: cuir-opt < %S/inputs/small.mlir | filecheck %s
// RUN: cat %S/inputs/small.mlir | cuir-opt - --print-op-generic | cuir-opt - | filecheck %s
// RUN: cat %S/inputs/bad-threads.mlir | not cuir-opt - 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not cuir-opt < %S/inputs/bad-threads.mlir 2>&1 | filecheck %s --check-prefix=ERR
// Empty input (or only comments) is an empty module, as in mlir-opt.
// RUN: cuir-opt < %S/inputs/empty.mlir | filecheck %s --check-prefix=EMPTY
// RUN: cuir-opt %S/inputs/empty.mlir --split-input-file | filecheck %s --check-prefix=EMPTY

// CHECK:      builtin.module {
// CHECK-NEXT:   cuir.kernel @small(%q: !cuir.global<4 x bf16, strided>) threads 384 smem 16400 cluster 1x1x1 tile_m 64 schedule grid {
// CHECK-NEXT:     %buf = cuir.alloc : !cuir.smem<64x128xbf16>
// CHECK-NEXT:     %bar = cuir.alloc : !cuir.mbarrier<2>
// CHECK-NEXT:     cuir.worker @producer threads 0 to 128 regs 24 (%p) {
// CHECK-NEXT:     }
// CHECK-NEXT:     cuir.worker @consumer threads 128 to 384 regs 240 (%c) {
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// ERR-NOT: Traceback
// ERR:     {{^}}<stdin>:2:1: error: threads must be a multiple of 128 up to 1024, got 100
// ERR-NOT: {{.}}

// EMPTY:      builtin.module {
// EMPTY-NEXT: }
