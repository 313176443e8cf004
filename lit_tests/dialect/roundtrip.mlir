// Custom <-> generic round trip of every CuIR op and type: the custom form
// re-parses to itself, and the generic form parses back to the same custom
// form. Three small kernels: @every_op (a warp-specialized producer/consumer
// pipeline using all 34 ops), @plain (grid schedule, default type
// parameters, and a discardable attribute on every op) and @claimed (dynamic
// schedule, a gemm token waited one loop iteration after its gemm_async).
// RUN: cuir-opt %s | cuir-opt | filecheck %s --match-full-lines
// RUN: cuir-opt %s --print-op-generic | cuir-opt | filecheck %s --match-full-lines
// RUN: cuir-opt %s | cuir-opt --print-op-generic | cuir-opt | filecheck %s --match-full-lines

builtin.module {
  cuir.kernel @every_op(%q: !cuir.global<4 x bf16, strided>, %lut: !cuir.global<2 x f32, row_major>, %scale: f32) threads 256 smem 65560 cluster 2x1x1 tile_m 64 schedule persistent longest_first {
    %a_smem = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
    %b_smem = cuir.alloc : !cuir.smem<128x128xbf16, swizzle 64>
    %full = cuir.alloc : !cuir.mbarrier<2>
    %empty = cuir.alloc : !cuir.mbarrier<1>
    cuir.mbarrier_init %full, 1 : !cuir.mbarrier<2>
    cuir.mbarrier_init %empty, 2 : !cuir.mbarrier<1>
    cuir.worker @producer threads 0 to 128 regs 24 (%pidx) {
      %c0 = arith.constant 0 : index
      %pid = cuir.program_id : index
      %rank = cuir.cluster_rank : index
      %seqlen = cuir.dim %q[2] : !cuir.global<4 x bf16, strided>
      cuir.for_each_tile (%qt, %h, %bt) {
        cuir.mbarrier_expect_tx %full[%c0], 16384 : !cuir.mbarrier<2>
        cuir.copy_async %q[%bt, %h, %qt, %c0] -> %a_smem[%c0], barrier %full[%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
        cuir.copy_async %q[%bt, %h, %qt, %c0] -> %a_smem[%c0], barrier %full[%c0] columns 64 multicast : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
        cuir.copy_async %q[%bt, %h, %qt, %c0] -> %b_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, swizzle 64>
        %group = cuir.commit_group : !cuir.token<@producer>
        cuir.wait_group %group : !cuir.token<@producer>
        cuir.copy %q[%bt, %h, %qt, %c0] -> %b_smem : !cuir.global<4 x bf16, strided> -> !cuir.smem<128x128xbf16, swizzle 64>
        cuir.copy %b_smem -> %q[%bt, %h, %qt, %c0] : !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.global<4 x bf16, strided>
        cuir.mbarrier_arrive %empty : !cuir.mbarrier<1>
        cuir.mbarrier_arrive %empty cta %c0 : !cuir.mbarrier<1>
        cuir.named_barrier_arrive %c0, 256
      }
    }
    cuir.worker @consumer threads 128 to 256 regs 240 (%cidx) {
      %i0 = arith.constant 0 : index
      %i1 = arith.constant 1 : index
      %zero = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
      %acc, %tiles = cuir.for_each_tile (%cqt, %ch, %cbt) iter_args(%o = %zero, %n = %i0) -> (!cuir.tile<64x128xf32, @consumer>, index) {
        cuir.mbarrier_wait %full[%i0], %i1 : !cuir.mbarrier<2>
        cuir.named_barrier_sync %i1, 256
        cuir.gemm_fence
        %s, %s_done = cuir.gemm_async abt %a_smem[%i0], %b_smem : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.tile<64x128xf32, @consumer>
        cuir.gemm_wait %s_done : !cuir.token<@consumer>
        %m = cuir.row_reduce max %s : !cuir.tile<64x128xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        %l = cuir.row_reduce sum %s init %m : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        %bias = cuir.fill -inf : !cuir.cols<128xf32, @consumer>
        %row_index = cuir.map at [%cqt] (%rq: index) {
          %rf = arith.index_cast %rq : index to i64
          %rv = arith.sitofp %rf : i64 to f32
          cuir.yield %rv : f32
        } : -> !cuir.rows<64xf32, @consumer>
        %p = cuir.map %s, %m, %bias at [%cqt, %i0] (%x: f32, %row_max: f32, %col_bias: f32, %qi: index, %ki: index) {
          %y = arith.mulf %x, %scale : f32
          %table = cuir.gather %lut[%qi, %ki] : !cuir.global<2 x f32, row_major>
          %biased = arith.addf %y, %table : f32
          %e = math.exp2 %biased : f32
          cuir.yield %e : f32
        } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.cols<128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        %lse = cuir.map %l (%sum: f32, %r: index) {
          %log = math.log %sum : f32
          cuir.yield %log : f32
        } : !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        %p_bf16 = cuir.convert %p : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
        %pv, %pv_done = cuir.gemm_async ab %p_bf16, %b_smem acc %o : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, swizzle 64>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        cuir.gemm_wait %pv_done : !cuir.token<@consumer>
        %a_regs = cuir.load %a_smem[%i1] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xbf16, @consumer>
        %b_regs = cuir.load %b_smem : !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.tile<128x128xbf16, @consumer>
        %s2 = cuir.gemm abt %a_regs, %b_regs : !cuir.tile<64x128xbf16, @consumer>, !cuir.tile<128x128xbf16, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        %o2 = cuir.gemm ab %a_regs, %b_regs acc %pv : !cuir.tile<64x128xbf16, @consumer>, !cuir.tile<128x128xbf16, @consumer>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        cuir.store %a_regs -> %a_smem[%i0] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
        cuir.store %lse -> %lut[%cqt, %i0] : !cuir.rows<64xf32, @consumer> -> !cuir.global<2 x f32, row_major>
        cuir.fence_async_shared
        cuir.store_async %a_smem[%i0] -> %q[%cbt, %ch, %cqt, %i0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
        %stored = cuir.commit_group : !cuir.token<@consumer>
        cuir.wait_group %stored : !cuir.token<@consumer>
        cuir.barrier
        cuir.cluster_barrier
        cuir.trap
        %n_next = arith.addi %n, %i1 : index
        cuir.yield %o2, %n_next : !cuir.tile<64x128xf32, @consumer>, index
      }
    }
  }
  cuir.kernel @plain(%t: !cuir.global<3 x f16, strided>) threads 128 smem 8200 cluster 1x1x1 tile_m 32 schedule grid attributes {arch = "sm_80"} {
    %buf = cuir.alloc {name = "tile"} : !cuir.smem<32x64xf16>
    %bar = cuir.alloc : !cuir.mbarrier<1>
    cuir.mbarrier_init %bar, 128 {phase = 0 : i64} : !cuir.mbarrier<1>
    cuir.worker @all threads 0 to 128 (%w) attributes {role = "all"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      cuir.for_each_tile (%qt, %h, %b) attributes {unroll = 1 : i64} {
        cuir.copy %t[%h, %qt, %c0] -> %buf {sync} : !cuir.global<3 x f16, strided> -> !cuir.smem<32x64xf16>
        %x = cuir.load %buf {vec = 8 : i64} : !cuir.smem<32x64xf16> -> !cuir.tile<32x64xf16, @all>
        %r = cuir.fill 1.5 {k} : !cuir.rows<32xf16, @all>
        %y = cuir.map %x, %r (%v: f16, %rv: f16, %i: index, %j: index) attributes {fast} {
          %z = arith.addf %v, %rv : f16
          cuir.yield %z : f16
        } : !cuir.tile<32x64xf16, @all>, !cuir.rows<32xf16, @all> -> !cuir.tile<32x64xf16, @all>
        %m = cuir.row_reduce max %y {k} : !cuir.tile<32x64xf16, @all> -> !cuir.rows<32xf16, @all>
        %f = cuir.convert %y {rnd = "rne"} : !cuir.tile<32x64xf16, @all> -> !cuir.tile<32x64xf32, @all>
        %g = cuir.gemm abt %x, %x {k} : !cuir.tile<32x64xf16, @all>, !cuir.tile<32x64xf16, @all> -> !cuir.tile<32x32xf32, @all>
        cuir.store %m -> %t[%b, %h, %qt] {k} : !cuir.rows<32xf16, @all> -> !cuir.global<3 x f16, strided>
        cuir.store %y -> %buf {k} : !cuir.tile<32x64xf16, @all> -> !cuir.smem<32x64xf16>
        cuir.mbarrier_arrive %bar {k} : !cuir.mbarrier<1>
        cuir.mbarrier_expect_tx %bar, 4096 {k} : !cuir.mbarrier<1>
        cuir.mbarrier_wait %bar, %c1 {k} : !cuir.mbarrier<1>
        cuir.copy_async %t[%h, %qt, %c0] -> %buf {k} : !cuir.global<3 x f16, strided>, !cuir.smem<32x64xf16>
        cuir.store_async %buf -> %t[%b, %qt, %c0] {k} : !cuir.smem<32x64xf16> -> !cuir.global<3 x f16, strided>
        %tok = cuir.commit_group {k} : !cuir.token<@all>
        cuir.wait_group %tok {k} : !cuir.token<@all>
        %acc, %done = cuir.gemm_async abt %buf, %buf {k} : !cuir.smem<32x64xf16>, !cuir.smem<32x64xf16> -> !cuir.tile<32x32xf32, @all>
        cuir.gemm_wait %done {k} : !cuir.token<@all>
        cuir.named_barrier_sync %c1, 128 {k}
        cuir.barrier {k}
        cuir.gemm_fence {k}
        cuir.fence_async_shared {k}
        %pid = cuir.program_id {k} : index
        %d = cuir.dim %t[0] {k} : !cuir.global<3 x f16, strided>
        %neg = cuir.fill -2.5e-20 : !cuir.cols<64xf32, @all>
        %inf = cuir.fill inf : !cuir.cols<64xf32, @all>
      }
    }
  }
  cuir.kernel @claimed(%t: !cuir.global<2 x f16, strided>) threads 128 smem 8192 cluster 1x1x1 tile_m 64 schedule dynamic longest_first {
    %buf = cuir.alloc : !cuir.smem<64x64xf16>
    cuir.worker @all threads 0 to 128 (%w) {
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      cuir.for_each_tile (%qt, %h, %b) {
        %first, %first_done = cuir.gemm_async abt %buf, %buf : !cuir.smem<64x64xf16>, !cuir.smem<64x64xf16> -> !cuir.tile<64x64xf32, @all>
        %last, %last_done = scf.for %j = %c1 to %c4 step %c1 iter_args(%acc = %first, %done = %first_done) -> (!cuir.tile<64x64xf32, @all>, !cuir.token<@all>) {
          cuir.gemm_wait %done : !cuir.token<@all>
          %next, %next_done = cuir.gemm_async abt %buf, %buf acc %acc : !cuir.smem<64x64xf16>, !cuir.smem<64x64xf16>, !cuir.tile<64x64xf32, @all> -> !cuir.tile<64x64xf32, @all>
          scf.yield %next, %next_done : !cuir.tile<64x64xf32, @all>, !cuir.token<@all>
        }
        cuir.gemm_wait %last_done : !cuir.token<@all>
      }
    }
  }
}

// CHECK: builtin.module {
// CHECK: cuir.kernel @every_op(%[[Q:[a-z0-9_]+]]: !cuir.global<4 x bf16, strided>, %[[LUT:[a-z0-9_]+]]: !cuir.global<2 x f32, row_major>, %[[SCALE:[a-z0-9_]+]]: f32) threads 256 smem 65560 cluster 2x1x1 tile_m 64 schedule persistent longest_first {
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// CHECK-NEXT: %[[B:[a-z0-9_]+]] = cuir.alloc : !cuir.smem<128x128xbf16, swizzle 64>
// CHECK-NEXT: %[[FULL:[a-z0-9_]+]] = cuir.alloc : !cuir.mbarrier<2>
// CHECK-NEXT: %[[EMPTY:[a-z0-9_]+]] = cuir.alloc : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.mbarrier_init %[[FULL]], 1 : !cuir.mbarrier<2>
// CHECK-NEXT: cuir.mbarrier_init %[[EMPTY]], 2 : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.worker @producer threads 0 to 128 regs 24 (%pidx) {
// CHECK-NEXT: %c0 = arith.constant 0 : index
// CHECK-NEXT: %pid = cuir.program_id : index
// CHECK-NEXT: %rank = cuir.cluster_rank : index
// CHECK-NEXT: %seqlen = cuir.dim %[[Q]][2] : !cuir.global<4 x bf16, strided>
// CHECK-NEXT: cuir.for_each_tile (%qt, %h, %bt) {
// CHECK-NEXT: cuir.mbarrier_expect_tx %[[FULL]][%c0], 16384 : !cuir.mbarrier<2>
// CHECK-NEXT: cuir.copy_async %[[Q]][%bt, %h, %qt, %c0] -> %[[A]][%c0], barrier %[[FULL]][%c0] : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
// CHECK-NEXT: cuir.copy_async %[[Q]][%bt, %h, %qt, %c0] -> %[[A]][%c0], barrier %[[FULL]][%c0] columns 64 multicast : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
// CHECK-NEXT: cuir.copy_async %[[Q]][%bt, %h, %qt, %c0] -> %[[B]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, swizzle 64>
// CHECK-NEXT: %[[GROUP:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@producer>
// CHECK-NEXT: cuir.wait_group %[[GROUP]] : !cuir.token<@producer>
// CHECK-NEXT: cuir.copy %[[Q]][%bt, %h, %qt, %c0] -> %[[B]] : !cuir.global<4 x bf16, strided> -> !cuir.smem<128x128xbf16, swizzle 64>
// CHECK-NEXT: cuir.copy %[[B]] -> %[[Q]][%bt, %h, %qt, %c0] : !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.global<4 x bf16, strided>
// CHECK-NEXT: cuir.mbarrier_arrive %[[EMPTY]] : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.mbarrier_arrive %[[EMPTY]] cta %c0 : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.named_barrier_arrive %c0, 256
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: cuir.worker @consumer threads 128 to 256 regs 240 (%cidx) {
// CHECK-NEXT: %i0 = arith.constant 0 : index
// CHECK-NEXT: %i1 = arith.constant 1 : index
// CHECK-NEXT: %[[ZERO:[a-z0-9_]+]] = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: %acc, %tiles = cuir.for_each_tile (%cqt, %ch, %cbt) iter_args(%[[O:[a-z0-9_]+]] = %[[ZERO]], %n = %i0) -> (!cuir.tile<64x128xf32, @consumer>, index) {
// CHECK-NEXT: cuir.mbarrier_wait %[[FULL]][%i0], %i1 : !cuir.mbarrier<2>
// CHECK-NEXT: cuir.named_barrier_sync %i1, 256
// CHECK-NEXT: cuir.gemm_fence
// CHECK-NEXT: %[[S:[a-z0-9_]+]], %[[S_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[A]][%i0], %[[B]] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
// CHECK-NEXT: %[[M:[a-z0-9_]+]] = cuir.row_reduce max %[[S]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// CHECK-NEXT: %l = cuir.row_reduce sum %[[S]] init %[[M]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// CHECK-NEXT: %bias = cuir.fill -inf : !cuir.cols<128xf32, @consumer>
// CHECK-NEXT: %row_index = cuir.map at [%cqt] (%rq: index) {
// CHECK-NEXT: %rf = arith.index_cast %rq : index to i64
// CHECK-NEXT: %rv = arith.sitofp %rf : i64 to f32
// CHECK-NEXT: cuir.yield %rv : f32
// CHECK-NEXT: } : -> !cuir.rows<64xf32, @consumer>
// CHECK-NEXT: %p = cuir.map %[[S]], %[[M]], %bias at [%cqt, %i0] (%x: f32, %row_max: f32, %col_bias: f32, %qi: index, %ki: index) {
// CHECK-NEXT: %y = arith.mulf %x, %[[SCALE]] : f32
// CHECK-NEXT: %table = cuir.gather %[[LUT]][%qi, %ki] : !cuir.global<2 x f32, row_major>
// CHECK-NEXT: %biased = arith.addf %y, %table : f32
// CHECK-NEXT: %e = math.exp2 %biased : f32
// CHECK-NEXT: cuir.yield %e : f32
// CHECK-NEXT: } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.cols<128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: %lse = cuir.map %l (%sum: f32, %r: index) {
// CHECK-NEXT: %log = math.log %sum : f32
// CHECK-NEXT: cuir.yield %log : f32
// CHECK-NEXT: } : !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// CHECK-NEXT: %[[P16:[a-z0-9_]+]] = cuir.convert %p : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// CHECK-NEXT: %pv, %[[PV_DONE:[a-z0-9_]+]] = cuir.gemm_async ab %[[P16]], %[[B]] acc %[[O]] : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, swizzle 64>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: cuir.gemm_wait %[[PV_DONE]] : !cuir.token<@consumer>
// CHECK-NEXT: %a_regs = cuir.load %[[A]][%i1] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xbf16, @consumer>
// CHECK-NEXT: %b_regs = cuir.load %[[B]] : !cuir.smem<128x128xbf16, swizzle 64> -> !cuir.tile<128x128xbf16, @consumer>
// CHECK-NEXT: %s2 = cuir.gemm abt %a_regs, %b_regs : !cuir.tile<64x128xbf16, @consumer>, !cuir.tile<128x128xbf16, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: %o2 = cuir.gemm ab %a_regs, %b_regs acc %pv : !cuir.tile<64x128xbf16, @consumer>, !cuir.tile<128x128xbf16, @consumer>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: cuir.store %a_regs -> %[[A]][%i0] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// CHECK-NEXT: cuir.store %lse -> %[[LUT]][%cqt, %i0] : !cuir.rows<64xf32, @consumer> -> !cuir.global<2 x f32, row_major>
// CHECK-NEXT: cuir.fence_async_shared
// CHECK-NEXT: cuir.store_async %[[A]][%i0] -> %[[Q]][%cbt, %ch, %cqt, %i0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
// CHECK-NEXT: %[[STORED:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@consumer>
// CHECK-NEXT: cuir.wait_group %[[STORED]] : !cuir.token<@consumer>
// CHECK-NEXT: cuir.barrier
// CHECK-NEXT: cuir.cluster_barrier
// CHECK-NEXT: cuir.trap
// CHECK-NEXT: %n_next = arith.addi %n, %i1 : index
// CHECK-NEXT: cuir.yield %o2, %n_next : !cuir.tile<64x128xf32, @consumer>, index
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: cuir.kernel @plain(%[[T:[a-z0-9_]+]]: !cuir.global<3 x f16, strided>) threads 128 smem 8200 cluster 1x1x1 tile_m 32 schedule grid attributes {arch = "sm_80"} {
// CHECK-NEXT: %[[BUF:[a-z0-9_]+]] = cuir.alloc {name = "tile"} : !cuir.smem<32x64xf16>
// CHECK-NEXT: %[[BAR:[a-z0-9_]+]] = cuir.alloc : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.mbarrier_init %[[BAR]], 128 {phase = 0 : i64} : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.worker @all threads 0 to 128 (%w) attributes {role = "all"} {
// CHECK-NEXT: %c0 = arith.constant 0 : index
// CHECK-NEXT: %c1 = arith.constant 1 : index
// CHECK-NEXT: cuir.for_each_tile (%qt, %h, %b) attributes {unroll = 1 : i64} {
// CHECK-NEXT: cuir.copy %[[T]][%h, %qt, %c0] -> %[[BUF]] {sync} : !cuir.global<3 x f16, strided> -> !cuir.smem<32x64xf16>
// CHECK-NEXT: %x = cuir.load %[[BUF]] {vec = 8 : i64} : !cuir.smem<32x64xf16> -> !cuir.tile<32x64xf16, @all>
// CHECK-NEXT: %r = cuir.fill 1.5 {k} : !cuir.rows<32xf16, @all>
// CHECK-NEXT: %y = cuir.map %x, %r (%v: f16, %rv: f16, %i: index, %j: index) attributes {fast} {
// CHECK-NEXT: %z = arith.addf %v, %rv : f16
// CHECK-NEXT: cuir.yield %z : f16
// CHECK-NEXT: } : !cuir.tile<32x64xf16, @all>, !cuir.rows<32xf16, @all> -> !cuir.tile<32x64xf16, @all>
// CHECK-NEXT: %[[M:[a-z0-9_]+]] = cuir.row_reduce max %y {k} : !cuir.tile<32x64xf16, @all> -> !cuir.rows<32xf16, @all>
// CHECK-NEXT: %f = cuir.convert %y {rnd = "rne"} : !cuir.tile<32x64xf16, @all> -> !cuir.tile<32x64xf32, @all>
// CHECK-NEXT: %g = cuir.gemm abt %x, %x {k} : !cuir.tile<32x64xf16, @all>, !cuir.tile<32x64xf16, @all> -> !cuir.tile<32x32xf32, @all>
// CHECK-NEXT: cuir.store %[[M]] -> %[[T]][%b, %h, %qt] {k} : !cuir.rows<32xf16, @all> -> !cuir.global<3 x f16, strided>
// CHECK-NEXT: cuir.store %y -> %[[BUF]] {k} : !cuir.tile<32x64xf16, @all> -> !cuir.smem<32x64xf16>
// CHECK-NEXT: cuir.mbarrier_arrive %[[BAR]] {k} : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.mbarrier_expect_tx %[[BAR]], 4096 {k} : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.mbarrier_wait %[[BAR]], %c1 {k} : !cuir.mbarrier<1>
// CHECK-NEXT: cuir.copy_async %[[T]][%h, %qt, %c0] -> %[[BUF]] {k} : !cuir.global<3 x f16, strided>, !cuir.smem<32x64xf16>
// CHECK-NEXT: cuir.store_async %[[BUF]] -> %[[T]][%b, %qt, %c0] {k} : !cuir.smem<32x64xf16> -> !cuir.global<3 x f16, strided>
// CHECK-NEXT: %[[TOK:[a-z0-9_]+]] = cuir.commit_group {k} : !cuir.token<@all>
// CHECK-NEXT: cuir.wait_group %[[TOK]] {k} : !cuir.token<@all>
// CHECK-NEXT: %acc, %[[DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[BUF]], %[[BUF]] {k} : !cuir.smem<32x64xf16>, !cuir.smem<32x64xf16> -> !cuir.tile<32x32xf32, @all>
// CHECK-NEXT: cuir.gemm_wait %[[DONE]] {k} : !cuir.token<@all>
// CHECK-NEXT: cuir.named_barrier_sync %c1, 128 {k}
// CHECK-NEXT: cuir.barrier {k}
// CHECK-NEXT: cuir.gemm_fence {k}
// CHECK-NEXT: cuir.fence_async_shared {k}
// CHECK-NEXT: %pid = cuir.program_id {k} : index
// CHECK-NEXT: %d = cuir.dim %[[T]][0] {k} : !cuir.global<3 x f16, strided>
// CHECK-NEXT: %neg = cuir.fill -2.5e-20 : !cuir.cols<64xf32, @all>
// CHECK-NEXT: %inf = cuir.fill inf : !cuir.cols<64xf32, @all>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: cuir.kernel @claimed(%[[CT:[a-z0-9_]+]]: !cuir.global<2 x f16, strided>) threads 128 smem 8192 cluster 1x1x1 tile_m 64 schedule dynamic longest_first {
// CHECK-NEXT: %[[CBUF:[a-z0-9_]+]] = cuir.alloc : !cuir.smem<64x64xf16>
// CHECK-NEXT: cuir.worker @all threads 0 to 128 (%[[CW:[a-z0-9_]+]]) {
// CHECK-NEXT: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-NEXT: %[[C4:[a-z0-9_]+]] = arith.constant 4 : index
// CHECK-NEXT: cuir.for_each_tile (%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) {
// CHECK-NEXT: %first, %[[FIRST_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[CBUF]], %[[CBUF]] : !cuir.smem<64x64xf16>, !cuir.smem<64x64xf16> -> !cuir.tile<64x64xf32, @all>
// CHECK-NEXT: %last, %[[LAST_DONE:[a-z0-9_]+]] = scf.for %j = %[[C1]] to %[[C4]] step %[[C1]] iter_args(%acc = %first, %[[DONE:[a-z0-9_]+]] = %[[FIRST_DONE]]) -> (!cuir.tile<64x64xf32, @all>, !cuir.token<@all>) {
// CHECK-NEXT: cuir.gemm_wait %[[DONE]] : !cuir.token<@all>
// CHECK-NEXT: %next, %[[NEXT_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[CBUF]], %[[CBUF]] acc %acc : !cuir.smem<64x64xf16>, !cuir.smem<64x64xf16>, !cuir.tile<64x64xf32, @all> -> !cuir.tile<64x64xf32, @all>
// CHECK-NEXT: scf.yield %next, %[[NEXT_DONE]] : !cuir.tile<64x64xf32, @all>, !cuir.token<@all>
// CHECK-NEXT: }
// CHECK-NEXT: cuir.gemm_wait %[[LAST_DONE]] : !cuir.token<@all>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
