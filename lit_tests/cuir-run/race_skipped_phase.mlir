// RUN: not cuir-run %s --shape 1,1,1,64,64,128 2>&1 | filecheck %s
//
// DELIBERATELY WRONG: One instance arrives twice at a one-arrival mbarrier before its first wait,
// with parity 1: the wait returns for phase 1 and skips phase 0.

builtin.module {
  cuir.kernel @skip(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>) threads 128 smem 16392 cluster 1x1x1 tile_m 64 schedule grid {
    %q_smem = cuir.alloc : !cuir.smem<64x128xbf16>
    %ready = cuir.alloc : !cuir.mbarrier<1>
    cuir.mbarrier_init %ready, 1 : !cuir.mbarrier<1>
    cuir.worker @w threads 0 to 128 (%index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %q_row = arith.muli %q_tile, %c64 : index
        cuir.copy %q[%batch, %head, %q_row, %c0] -> %q_smem : !cuir.global<4 x bf16, strided> -> !cuir.smem<64x128xbf16>
        cuir.mbarrier_arrive %ready : !cuir.mbarrier<1>
        cuir.mbarrier_arrive %ready : !cuir.mbarrier<1>
        cuir.mbarrier_wait %ready, %c1 : !cuir.mbarrier<1>
        cuir.barrier
        cuir.copy %q_smem -> %o[%batch, %head, %q_row, %c0] : !cuir.smem<64x128xbf16> -> !cuir.global<4 x bf16, strided>
      }
    }
  }
}

// CHECK: {{.*}}race_skipped_phase.mlir:20:9: error: wrong phase: cuir.mbarrier_wait at {{.*}}race_skipped_phase.mlir:20:9 in @w[0] returns for phase 1 of %ready (parity 1), skipping phase 0, which it never waited for
// CHECK: cuir-run: race: 1 diagnostic(s) at B=1 HQ=1 HKV=1 SQ=64 SKV=64 D=128 seed=0 schedule=round-robin
