// Kernel arguments are bound by name at launch, and the custom form carries
// the names as SSA names: they must survive printing exactly, `_N` suffixes
// included, and body values must not take them.
// RUN: cuir-opt %s | cuir-opt | filecheck %s --match-full-lines
// RUN: cuir-opt %s | cuir-opt --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: cuir-opt %s --print-op-generic | cuir-opt | cuir-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

cuir.kernel @names(%lse_2: f32, %scale: f32, %q_0: f32) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %lse = arith.addf %lse_2, %scale : f32
    %lse_1 = arith.addf %lse, %q_0 : f32
    %scale_1 = arith.addf %lse_1, %scale : f32
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   cuir.kernel @names(%lse_2: f32, %scale: f32, %q_0: f32) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
// CHECK-NEXT:     cuir.worker @w threads 0 to 128 (%i) {
// CHECK-NEXT:       %lse_3 = arith.addf %lse_2, %scale : f32
// CHECK-NEXT:       %lse_4 = arith.addf %lse_3, %q_0 : f32
// CHECK-NEXT:       %scale_1 = arith.addf %lse_4, %scale : f32
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GENERIC: "cuir.kernel"() <{sym_name = "names", arg_names = ["lse_2", "scale", "q_0"],
