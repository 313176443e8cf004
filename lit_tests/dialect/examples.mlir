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
// SM80:      cuir.kernel @attention_fwd_sm80(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>, %lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 128 smem 65536 cluster 1x1x1 tile_m 128 schedule grid source "attention_sm80.cu" {
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
// SM90:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
// SM90-NEXT:   %[[Q_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[K_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[V_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[O_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90:        cuir.worker @producer threads 0 to 128 regs 24 (%{{.+}}) {
// SM90:          cuir.copy_async %k[{{.+}}] -> %[[K_SMEM]][%[[STAGE:.+]]], barrier %k_full[%[[STAGE]]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
// SM90:        cuir.worker @consumer threads 128 to 384 regs 240 (%[[GROUP:.+]]) {
// An empty group stands for the TMA store before the first tile; each tile's store token is carried.
// SM90:          %[[NO_STORE:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@consumer>
// SM90-NEXT:     %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[LAST_STORE:[a-z0-9_]+]] = cuir.for_each_tile ({{.+}}) iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %[[PREV_STORE:[a-z0-9_]+]] = %[[NO_STORE]]) -> (index, index, !cuir.token<@consumer>) {
// SM90:          %[[M_INIT:[a-z0-9_]+]] = cuir.fill -inf : !cuir.rows<64xf32, @consumer>
// SM90-NEXT:     %[[L_INIT:[a-z0-9_]+]] = cuir.fill 0.0 : !cuir.rows<64xf32, @consumer>
// SM90-NEXT:     %[[O_ZERO:[a-z0-9_]+]] = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
// kv tile 0: S_0, then the same softmax update as the loop, from max -inf and sum 0.
// SM90:          %[[S0:[a-z0-9_]+]], %[[S0_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_wait %[[S0_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     %[[SCORE0:[a-z0-9_]+]] = cuir.map %[[S0]] at
// SM90:          %[[M0:[a-z0-9_]+]] = cuir.row_reduce max %[[SCORE0]] init %[[M_INIT]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// SM90-NEXT:     %[[ALPHA0:[a-z0-9_]+]] = cuir.map %[[M_INIT]], %[[M0]] (
// SM90:          %[[P0:[a-z0-9_]+]] = cuir.map %[[SCORE0]], %[[M0]] (
// SM90:          %[[L0_RESCALED:[a-z0-9_]+]] = cuir.map %[[L_INIT]], %[[ALPHA0]] (
// SM90:          %[[L0:[a-z0-9_]+]] = cuir.row_reduce sum %[[P0]] init %[[L0_RESCALED]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// K_0's stage is released after its softmax, as in the loop.
// SM90-NEXT:     cuir.mbarrier_arrive %k_empty[%{{.+}}] : !cuir.mbarrier<2>
// The loop carries max, sum, O, the f32 P and alpha of the last softmax, and the in-flight P V token (S_0's at first).
// SM90:          %[[M_LAST:[a-z0-9_]+]], %[[L_LAST:[a-z0-9_]+]], %[[O_LAST:[a-z0-9_]+]], %[[P_LAST:[a-z0-9_]+]], %[[ALPHA_LAST:[a-z0-9_]+]], %[[PV_LAST_DONE:[a-z0-9_]+]], %[[COUNT_LAST:[a-z0-9_]+]] = scf.for %[[J:[a-z0-9_]+]] = %[[C1:[a-z0-9_]+]] to %[[NUM_KV_TILES:[a-z0-9_]+]] step %[[C1]] iter_args(%[[M:[a-z0-9_]+]] = %[[M0]], %[[L:[a-z0-9_]+]] = %[[L0]], %[[ACC:[a-z0-9_]+]] = %[[O_ZERO]], %[[P_PREV:[a-z0-9_]+]] = %[[P0]], %[[ALPHA_PREV:[a-z0-9_]+]] = %[[ALPHA0]], %[[PV_PREV_DONE:[a-z0-9_]+]] = %[[S0_DONE]], %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (!cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.token<@consumer>, index) {
// Step j: wait for V_{j-1}, then K_j (issue order), retire P_{j-2} V_{j-2} (V_{j-2} released for j > 1), P_{j-1} to
// bf16, O rescaled.
// SM90:            cuir.mbarrier_wait %v_full[%[[PREV_STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// SM90-NEXT:       cuir.mbarrier_wait %k_full[%[[STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// SM90-NEXT:       cuir.gemm_wait %[[PV_PREV_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:       %[[IN_FLIGHT:[a-z0-9_]+]] = arith.cmpi ugt, %[[J]], %[[C1]] : index
// SM90-NEXT:       scf.if %[[IN_FLIGHT]] {
// SM90-NEXT:         %{{[a-z0-9_]+}} = arith.subi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : index
// SM90-NEXT:         %[[RETIRED:[a-z0-9_]+]] = arith.remui %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : index
// SM90-NEXT:         cuir.mbarrier_arrive %v_empty[%[[RETIRED]]] : !cuir.mbarrier<2>
// SM90-NEXT:       }
// SM90-NEXT:       %[[P_BF16:[a-z0-9_]+]] = cuir.convert %[[P_PREV]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90-NEXT:       %[[ACC_RESCALED:[a-z0-9_]+]] = cuir.map %[[ACC]], %[[ALPHA_PREV]] (
// Then S_j and P_{j-1} V_{j-1} in one GEMM turn; only S_j is waited for.
// SM90:            cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:       cuir.gemm_fence
// SM90-NEXT:       %[[S:[a-z0-9_]+]], %[[S_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%[[STAGE]]] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:       %[[ACC_PV:[a-z0-9_]+]], %[[PV_DONE:[a-z0-9_]+]] = cuir.gemm_async ab %[[P_BF16]], %[[V_SMEM]][%[[PREV_STAGE]]] acc %[[ACC_RESCALED]] : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:       cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:       cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:       %[[SCORE:[a-z0-9_]+]] = cuir.map %[[S]] at
// SM90:            %[[M_NEW:[a-z0-9_]+]] = cuir.row_reduce max %[[SCORE]] init %[[M]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// SM90-NEXT:       %[[ALPHA:[a-z0-9_]+]] = cuir.map %[[M]], %[[M_NEW]] (
// SM90:            %[[P:[a-z0-9_]+]] = cuir.map %[[SCORE]], %[[M_NEW]] (
// SM90:            %[[L_RESCALED:[a-z0-9_]+]] = cuir.map %[[L]], %[[ALPHA]] (
// SM90:            %[[L_NEW:[a-z0-9_]+]] = cuir.row_reduce sum %[[P]] init %[[L_RESCALED]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// K_j's stage is released after the softmax of S_j.
// SM90-NEXT:       cuir.mbarrier_arrive %k_empty[%[[STAGE]]] : !cuir.mbarrier<2>
// SM90:            scf.yield %[[M_NEW]], %[[L_NEW]], %[[ACC_PV]], %[[P]], %[[ALPHA]], %[[PV_DONE]], %{{[a-z0-9_]+}} :
// SM90-NEXT:     }
// SM90-NEXT:     cuir.mbarrier_arrive %q_empty : !cuir.mbarrier<1>
// Last P V: retired like a loop step (V_{n-2} released for n > 1), then issued and waited for.
// SM90:          cuir.mbarrier_wait %v_full[%[[LAST_STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// SM90-NEXT:     cuir.gemm_wait %[[PV_LAST_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     %[[LAST_IN_FLIGHT:[a-z0-9_]+]] = arith.cmpi ugt, %[[NUM_KV_TILES]], %[[C1]] : index
// SM90-NEXT:     scf.if %[[LAST_IN_FLIGHT]] {
// SM90-NEXT:       %{{[a-z0-9_]+}} = arith.subi %[[COUNT_LAST]], %{{[a-z0-9_]+}} : index
// SM90-NEXT:       %[[RETIRED_LAST:[a-z0-9_]+]] = arith.remui %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : index
// SM90-NEXT:       cuir.mbarrier_arrive %v_empty[%[[RETIRED_LAST]]] : !cuir.mbarrier<2>
// SM90-NEXT:     }
// SM90-NEXT:     %[[P_LAST_BF16:[a-z0-9_]+]] = cuir.convert %[[P_LAST]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90-NEXT:     %[[O_RESCALED:[a-z0-9_]+]] = cuir.map %[[O_LAST]], %[[ALPHA_LAST]] (
// SM90:          cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_fence
// SM90-NEXT:     %[[O_ACC:[a-z0-9_]+]], %[[O_DONE:[a-z0-9_]+]] = cuir.gemm_async ab %[[P_LAST_BF16]], %[[V_SMEM]][%[[LAST_STAGE]]] acc %[[O_RESCALED]] :
// SM90-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_wait %[[O_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     cuir.mbarrier_arrive %v_empty[%[[LAST_STAGE]]] : !cuir.mbarrier<2>
// Epilogue: LSE, O normalized, then the previous tile's store is waited for before o_smem is overwritten.
// SM90-NEXT:     %[[LSE:[a-z0-9_]+]] = cuir.map %[[M_LAST]], %[[L_LAST]] (
// SM90:          cuir.store %[[LSE]] -> %lse[{{.+}}] : !cuir.rows<64xf32, @consumer> -> !cuir.global<3 x f32, strided>
// SM90-NEXT:     %[[O_NORMALIZED:[a-z0-9_]+]] = cuir.map %[[O_ACC]], %[[L_LAST]] (
// SM90:          %[[O_BF16:[a-z0-9_]+]] = cuir.convert %[[O_NORMALIZED]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90-NEXT:     cuir.wait_group %[[PREV_STORE]] : !cuir.token<@consumer>
// SM90-NEXT:     cuir.store %[[O_BF16]] -> %[[O_SMEM]][%[[GROUP]]] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:     cuir.fence_async_shared
// SM90-NEXT:     cuir.store_async %[[O_SMEM]][%[[GROUP]]] -> %o[{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
// SM90-NEXT:     %[[O_STORED:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@consumer>
// SM90-NEXT:     %[[NEXT_TILE:[a-z0-9_]+]] = arith.addi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : index
// SM90-NEXT:     cuir.yield %[[COUNT_LAST]], %[[NEXT_TILE]], %[[O_STORED]] : index, index, !cuir.token<@consumer>
// SM90-NEXT:   }
// SM90:          cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:     }
// SM90-NEXT:     cuir.wait_group %[[LAST_STORE]] : !cuir.token<@consumer>
// SM90-NEXT:   }
// SM90-NOT:    cuir.worker

// The race example verifies (the race is a run-time property): in the loop,
// the map reads S before the gemm_wait of its token.
// RACE:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
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
// RACE-NEXT:     %{{.+}} = cuir.row_reduce max %{{.+}} init
