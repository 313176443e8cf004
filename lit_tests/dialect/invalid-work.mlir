// Verifiers of the work-assignment ops (cuir.kernel, cuir.worker,
// cuir.for_each_tile, cuir.dim): one chunk per message, reported at the op.
// RUN: cuir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: kernel @k names 2 arguments but has 1
"cuir.kernel"() <{sym_name = "k", arg_names = ["a", "b"], threads = 128 : i64, smem_bytes = 0 : i64, cluster = [1 : i64, 1 : i64, 1 : i64], tile_m = 64 : i64, schedule = #cuir<schedule grid>, order = #cuir<tile_order natural>}> ({
^bb0(%a: f32):
  cuir.worker @w threads 0 to 128 (%i) {
  }
}) : () -> ()

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: threads must be a multiple of 128 up to 1024, got 96
cuir.kernel @k() threads 96 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: threads must be a multiple of 128 up to 1024, got 1152
cuir.kernel @k() threads 1152 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:70: error: Expected `grid`, `persistent`, or `dynamic`.
cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule static {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:216: error: Expected `natural`, `longest_first`, or `head_by_head`.
"cuir.kernel"() <{sym_name = "k", arg_names = [], threads = 128 : i64, smem_bytes = 0 : i64, cluster = [1 : i64, 1 : i64, 1 : i64], tile_m = 64 : i64, schedule = #cuir<schedule persistent>, order = #cuir<tile_order shortest_first>}> ({
  cuir.worker @w threads 0 to 128 (%i) {
  }
}) : () -> ()

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: cluster shape has three positive sizes
cuir.kernel @k() threads 128 smem 0 cluster 2x0x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: cluster shape has three positive sizes
"cuir.kernel"() <{sym_name = "k", arg_names = [], threads = 128 : i64, smem_bytes = 0 : i64, cluster = [1 : i64, 1 : i64], tile_m = 64 : i64, schedule = #cuir<schedule grid>, order = #cuir<tile_order natural>}> ({
  cuir.worker @w threads 0 to 128 (%i) {
  }
}) : () -> ()

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: tile_m must be positive
cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 0 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: skip_empty needs schedule dynamic: the claiming program skips the tiles
cuir.kernel @k(%kv_num_blocks: !cuir.global<3 x i32, row_major>, %full_kv_num_blocks: !cuir.global<3 x i32, row_major>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule persistent skip_empty {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: skip_empty reads the block lists, but the kernel has no argument full_kv_num_blocks
cuir.kernel @k(%kv_num_blocks: !cuir.global<3 x i32, row_major>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule dynamic skip_empty {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: kernel reserves 240000 bytes of shared memory, above the 232448-byte limit
cuir.kernel @k() threads 128 smem 240000 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// smem over budget: 2 x 64x128xbf16 (32768) + 2 mbarriers (16) > 32768.
// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: shared-memory allocations need 32784 bytes but the kernel reserves only 32768
cuir.kernel @k() threads 128 smem 32768 cluster 1x1x1 tile_m 64 schedule grid {
  %s = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
  %b = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: kernel @k has no cuir.worker
cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: worker @consumer uses threads up to 384 but the kernel has 256
cuir.kernel @k() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @producer threads 0 to 128 (%i) {
  }
  cuir.worker @consumer threads 128 to 384 (%j) {
  }
}

// -----

// duplicate worker names
// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: two workers are named @w; a worker name identifies the owner of register values
cuir.kernel @k() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
  cuir.worker @w threads 128 to 256 (%j) {
  }
}

// -----

// register values are not kernel arguments
// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: kernel argument 't' has register type !cuir.tile<64x64xf32, @w>; kernel arguments are global tensors or scalars
cuir.kernel @k(%t: !cuir.tile<64x64xf32, @w>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

// overlapping workers
// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: workers @producer and @consumer share threads
cuir.kernel @k() threads 384 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @producer threads 0 to 256 (%i) {
  }
  cuir.worker @consumer threads 128 to 384 (%j) {
  }
}

// -----

// register budgets over what the block holds from launch: 128 x 32 + 256 x 240 = 65536 fits the register
// file, but a 384-thread block starts with 168 x 384 = 64512, and setmaxnreg.inc waits forever for the rest
// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: worker register budgets need 65536 registers, above the 64512 a 384-thread block holds from launch (168 per thread; setmaxnreg only moves registers between its warps)
cuir.kernel @k() threads 384 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @producer threads 0 to 128 regs 32 (%i) {
  }
  cuir.worker @consumer threads 128 to 384 regs 240 (%j) {
  }
}

// -----

cuir.kernel @k() threads 256 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: worker @w threads [96, 160) must be whole warp groups of 128 threads or whole warps of one warp group
  cuir.worker @w threads 96 to 160 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: worker @w threads [128, 128) must be whole warp groups of 128 threads or whole warps of one warp group
  cuir.worker @w threads 128 to 128 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: worker @w body takes one index argument (the instance index)
  "cuir.worker"() <{sym_name = "w", thread_begin = 0 : i64, thread_end = 128 : i64}> ({
  ^bb0(%i: index, %j: index):
  }) : () -> ()
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: worker @w register budget must be a multiple of 8 in [24, 256], got 100
  cuir.worker @w threads 0 to 128 regs 100 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: worker @w register budget must be a multiple of 8 in [24, 256], got 264
  cuir.worker @w threads 0 to 128 regs 264 (%i) {
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: 'cuir.worker' expects parent op 'cuir.kernel'
cuir.worker @w threads 0 to 128 (%i) {
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:3: error: 'cuir.for_each_tile' must run inside a cuir.worker
  cuir.for_each_tile (%t, %h, %b) {
  }
  cuir.worker @w threads 0 to 128 (%i) {

  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: cuir.for_each_tile body takes (q_tile, head, batch) as index values followed by one argument per carried value
    "cuir.for_each_tile"() ({
    ^bb0(%t: index, %h: index):
      cuir.yield
    }) : () -> ()
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: cuir.for_each_tile body takes (q_tile, head, batch) as index values followed by one argument per carried value
    %n = "cuir.for_each_tile"(%c0) ({
    ^bb0(%t: index, %h: index, %b: i32, %n0: index):
      cuir.yield %n0 : index
    }) : (index) -> index
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    %x = arith.constant 0.0 : f32
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: cuir.for_each_tile body must yield its carried values (index)
    %n = cuir.for_each_tile (%t, %h, %b) iter_args(%count = %c0) -> (index) {
      cuir.yield %x : f32
    }
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: cuir.for_each_tile body must yield its carried values (none)
    cuir.for_each_tile (%t, %h, %b) {
      cuir.yield %c0 : index
    }
  }
}

// -----

cuir.kernel @k(%g: !cuir.global<2 x f32, strided>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: dimension 2 is out of range for a rank-2 tensor
    %n = cuir.dim %g[2] : !cuir.global<2 x f32, strided>
  }
}

// -----

// CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:1: error: a cluster spans the grid's x axis only (n x 1 x 1)
cuir.kernel @k() threads 128 smem 0 cluster 1x2x1 tile_m 64 schedule persistent {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}

// -----

cuir.kernel @k() threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule persistent {
  cuir.worker @w threads 0 to 128 (%i) {
    // CHECK-NEXT: {{.*}}invalid-work.mlir:[[# @LINE + 1]]:5: error: a cluster barrier needs a kernel cluster of more than one CTA
    cuir.cluster_barrier
  }
}

// Every chunk failed, with exactly one diagnostic each.
// CHECK-NEXT: // -----
// CHECK-NOT: error:
// CHECK-NOT: cuir.kernel
