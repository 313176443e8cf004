// The example programs parse, verify, and print back to a fixed point, in
// custom and generic form. A few structural lines of each are checked.
//
// RUN: cuir-opt %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix=SM80
// RUN: cuir-opt %examples/ir/attention_sm90.mlir | filecheck %s --check-prefix=SM90
// RUN: cuir-opt %examples/ir/attention_sm90_race.mlir | filecheck %s --check-prefix=RACE
//
// Printing is a fixed point, and the generic form reads back to the same text.
// RUN: cuir-opt %examples/ir/attention_sm80.mlir > %t.sm80
// RUN: cuir-opt %t.sm80 | diff %t.sm80 -
// RUN: cuir-opt %examples/ir/attention_sm80.mlir --print-op-generic | cuir-opt | diff %t.sm80 -
// RUN: cuir-opt %examples/ir/attention_sm90.mlir > %t.sm90
// RUN: cuir-opt %t.sm90 | diff %t.sm90 -
// RUN: cuir-opt %examples/ir/attention_sm90.mlir --print-op-generic | cuir-opt | diff %t.sm90 -
// RUN: cuir-opt %examples/ir/attention_sm90_race.mlir > %t.race
// RUN: cuir-opt %t.race | diff %t.race -
// RUN: cuir-opt %examples/ir/attention_sm90_race.mlir --print-op-generic | cuir-opt | diff %t.race -

// Ampere: one 128-thread worker, cp.async copies, mma.sync gemms on register tiles.
// SM80:      cuir.kernel @attention_fwd_sm80(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>, %lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 128 smem 65536 cluster 1x1x1 tile_m 128 schedule grid {
// SM80-NEXT:   %[[Q_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, swizzle 128>
// SM80-NEXT:   %[[K_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
// SM80-NEXT:   %[[V_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
// SM80-NEXT:   cuir.worker @mma threads 0 to 128 (%{{.+}}) {
// SM80-NOT:    cuir.worker
// SM80:          cuir.for_each_tile (%{{.+}}, %{{.+}}, %{{.+}}) {
// SM80:          cuir.copy_async %q[{{.+}}] -> %[[Q_SMEM]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, swizzle 128>
// SM80:          %[[Q_REGS:.+]] = cuir.load %[[Q_SMEM]] : !cuir.smem<128x128xbf16, swizzle 128> -> !cuir.tile<128x128xbf16, @mma>
// SM80-NEXT:     %[[K_REGS:.+]] = cuir.load %[[K_SMEM]] : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xbf16, @mma>
// SM80-NEXT:     %{{.+}} = cuir.gemm abt %[[Q_REGS]], %[[K_REGS]] : !cuir.tile<128x128xbf16, @mma>, !cuir.tile<64x128xbf16, @mma> -> !cuir.tile<128x64xf32, @mma>
// SM80:          %{{.+}} = cuir.gemm ab %{{.+}}, %{{.+}} acc %{{.+}} : !cuir.tile<128x64xbf16, @mma>, !cuir.tile<64x128xbf16, @mma>, !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
// SM80-NOT:    cuir.gemm_async

// Hopper: a TMA producer and two ping-ponging wgmma consumers.
// SM90:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent {
// SM90-NEXT:   %[[Q_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[K_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[V_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[O_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90:        cuir.worker @producer threads 0 to 128 regs 24 (%{{.+}}) {
// SM90:          cuir.copy_async %k[{{.+}}] -> %[[K_SMEM]][%[[STAGE:.+]]], barrier %k_full[%[[STAGE]]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
// SM90:        cuir.worker @consumer threads 128 to 384 regs 240 (%[[GROUP:.+]]) {
// SM90:          %{{.+}}, %[[FIRST_DONE:.+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90:          cuir.gemm_wait %[[FIRST_DONE]] : !cuir.token<@consumer>
// SM90:          %[[S:.+]], %[[S_DONE:.+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:     %{{.+}}, %[[PV_DONE:.+]] = cuir.gemm_async ab %{{.+}}, %[[V_SMEM]][%{{.+}}] acc %{{.+}} : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     cuir.mbarrier_arrive %k_empty[%{{.+}}] : !cuir.mbarrier<2>
// SM90-NEXT:     %{{.+}} = cuir.map %[[S]] at
// SM90:          cuir.gemm_wait %[[PV_DONE]] : !cuir.token<@consumer>
// SM90:          cuir.store_async %[[O_SMEM]][%[[GROUP]]] -> %o[{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
// SM90-NOT:    cuir.worker

// The race example verifies (the race is a run-time property): the map reads
// S before the gemm_wait of its token.
// RACE:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent {
// RACE:        cuir.worker @producer threads 0 to 128 regs 24
// RACE:        cuir.worker @consumer threads 128 to 384 regs 240
// RACE:          scf.for
// RACE:          cuir.gemm_fence
// RACE-NEXT:     %[[S:.+]], %[[S_DONE:.+]] = cuir.gemm_async abt %q_smem[%group], %k_smem[%{{.+}}] : {{.*}} -> !cuir.tile<64x128xf32, @consumer>
// RACE-NEXT:     %{{.+}}, %{{.+}} = cuir.gemm_async ab
// RACE-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// RACE-NEXT:     %{{.+}} = cuir.map %[[S]] at
// RACE:          } : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// RACE-NEXT:     cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
