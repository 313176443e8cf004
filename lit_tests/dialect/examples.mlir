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
// SM80:      cuir.kernel @attention_sm80_bf16_d128_full(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>, %lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 128 smem 98304 cluster 1x1x1 tile_m 128 schedule grid longest_first source "attention_sm80.cu" {
// SM80-NEXT:   %[[Q_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, swizzle 128>
// SM80-NEXT:   %[[K_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM80-NEXT:   %[[V_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM80-NEXT:   cuir.worker @mma threads 0 to 128 (%{{.+}}) {
// SM80-NOT:    cuir.worker
// SM80:          cuir.for_each_tile (%{{.+}}, %{{.+}}, %{{.+}}) {
// SM80:          cuir.copy_async %q[{{.+}}] -> %[[Q_SMEM]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, swizzle 128>
// SM80:          %[[Q_REGS:.+]] = cuir.load %[[Q_SMEM]] : !cuir.smem<128x128xbf16, swizzle 128> -> !cuir.tile<128x128xbf16, @mma>
// SM80-NEXT:     %[[K_REGS:.+]] = cuir.load %[[K_SMEM]][%{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xbf16, @mma>
// SM80-NEXT:     %{{.+}} = cuir.gemm abt %[[Q_REGS]], %[[K_REGS]] : !cuir.tile<128x128xbf16, @mma>, !cuir.tile<64x128xbf16, @mma> -> !cuir.tile<128x64xf32, @mma>
// SM80:          %{{.+}} = cuir.gemm ab %{{.+}}, %{{.+}} acc %{{.+}} : !cuir.tile<128x64xbf16, @mma>, !cuir.tile<64x128xbf16, @mma>, !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
// SM80-NOT:    cuir.gemm_async

// Hopper (the lift of attention_sm90.cu): a TMA producer and two ping-ponging wgmma consumers.
// SM90:      cuir.kernel @attention_sm90_bf16_d128_full({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
// SM90-NEXT:   %[[Q_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[K_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[V_SMEM:.+]] = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:   %[[O_SMEM:.+]] = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90:        cuir.worker @producer threads 0 to 128 regs 24 (%{{.+}}) {
// SM90:          cuir.copy_async %k[{{.+}}] -> %[[K_SMEM]][%[[STAGE:.+]]], barrier %k_full[%[[STAGE]]] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
// SM90:        cuir.worker @consumer threads 128 to 384 regs 240 (%[[GROUP:.+]]) {
// An empty group stands for the TMA store before the first tile; each tile's store token is carried.
// SM90:          %[[NO_STORE:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@consumer>
// SM90-NEXT:     %[[LAST_STORE:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = cuir.for_each_tile ({{.+}}) iter_args(%[[PREV_STORE:[a-z0-9_]+]] = %[[NO_STORE]], {{.+}}) -> (!cuir.token<@consumer>, index, index) {
// kv tile 0: whether it needs a mask (decided at the top of its step), S_0; the bounds select only where the
// tile needs a mask; the row max of unscaled scores.
// SM90:          %[[NEEDS_MASK0:[a-z0-9_]+]] = arith.cmpi sge, %{{.+}}, %[[FULL_END:[a-z0-9_]+]] : index
// SM90:          %[[S0:[a-z0-9_]+]], %[[S0_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:     %{{.+}} = arith.subi
// SM90-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_wait %[[S0_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     %[[SCORE0:[a-z0-9_]+]] = scf.if %[[NEEDS_MASK0]] -> (!cuir.tile<64x128xf32, @consumer>) {
// SM90-NEXT:       %{{.+}} = cuir.map %[[S0]] at
// SM90:          } else {
// SM90-NEXT:       scf.yield %[[S0]] : !cuir.tile<64x128xf32, @consumer>
// K_0's stage is released after its scores, before the softmax.
// SM90:          cuir.mbarrier_arrive %k_empty[%{{.+}}] : !cuir.mbarrier<2>
// SM90:          %[[M0:[a-z0-9_]+]] = cuir.row_reduce max %[[SCORE0]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// The exp2 map multiplies unscaled scores by scale_log2 (the fold of the softmax scale).
// SM90:          %[[P0:[a-z0-9_]+]] = cuir.map %[[SCORE0]], %{{.+}} (
// SM90-NEXT:       arith.mulf %{{.+}}, %scale_log2 : f32
// SM90:          %[[O_ZERO:[a-z0-9_]+]] = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
// P_0 to bf16 at the end of its softmax: the A operand of the first P V.
// SM90-NEXT:     %[[P0_BF16:[a-z0-9_]+]] = cuir.convert %[[P0]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90:          %[[L0:[a-z0-9_]+]] = cuir.row_reduce sum %[[P0]] init %{{.+}} : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// The loop carries the in-flight GEMM group (S_0's at first), P (f32 and bf16), O, alpha, max, sum and the
// pipeline count.
// SM90-NEXT:     %[[PV_LAST_DONE:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %[[O_LAST:[a-z0-9_]+]], %[[P_LAST_BF16:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %[[M_LAST:[a-z0-9_]+]], %[[L_LAST:[a-z0-9_]+]], %[[COUNT_LAST:[a-z0-9_]+]] = scf.for %[[J:[a-z0-9_]+]] = %[[C1:[a-z0-9_]+]] to %[[NUM_KV_TILES:[a-z0-9_]+]] step %[[C1]] iter_args(%{{[a-z0-9_]+}} = %[[S0_DONE]], %{{[a-z0-9_]+}} = %[[P0]], %[[ACC:[a-z0-9_]+]] = %[[O_ZERO]], %[[P_PREV_BF16:[a-z0-9_]+]] = %[[P0_BF16]], %{{[a-z0-9_]+}} = %{{.+}}, %[[M:[a-z0-9_]+]] = %[[M0]], %[[L:[a-z0-9_]+]] = %[[L0]], %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (!cuir.token<@consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xbf16, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, index) {
// Step j: whether kv tile j needs its mask (outside [0, full_end)), tested where the step begins.
// SM90-NEXT:       %{{.+}} = arith.cmpi slt, %[[J]], %{{.+}} : index
// SM90-NEXT:       %{{.+}} = arith.cmpi sge, %[[J]], %[[FULL_END]] : index
// SM90-NEXT:       %[[NEEDS_MASK:[a-z0-9_]+]] = arith.ori %{{.+}}, %{{.+}} : i1
// Then wait for V_{j-1}, then K_j (issue order).
// SM90:            cuir.mbarrier_wait %v_full[%[[PREV_STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// SM90:            cuir.mbarrier_wait %k_full[%[[STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// Then S_j and P_{j-1} V_{j-1} in one GEMM turn; only S_j is waited for.
// SM90-NEXT:       cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:       cuir.gemm_fence
// SM90-NEXT:       %[[S:[a-z0-9_]+]], %[[S_DONE:[a-z0-9_]+]] = cuir.gemm_async abt %[[Q_SMEM]][%[[GROUP]]], %[[K_SMEM]][%[[STAGE]]] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:       %[[ACC_PV:[a-z0-9_]+]], %[[PV_DONE:[a-z0-9_]+]] = cuir.gemm_async ab %[[P_PREV_BF16]], %[[V_SMEM]][%[[PREV_STAGE]]] acc %[[ACC]] : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// SM90-NEXT:       cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:       cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
// K_j's stage is released once S_j has landed (D = 128, kReleaseKOnScores).
// SM90-NEXT:       cuir.mbarrier_arrive %k_empty[%[[STAGE]]] : !cuir.mbarrier<2>
// The mask branch runs on the kv tiles outside [0, full_end) only.
// SM90-NEXT:       %[[SCORE:[a-z0-9_]+]] = scf.if %[[NEEDS_MASK]] -> (!cuir.tile<64x128xf32, @consumer>) {
// SM90-NEXT:         %{{.+}} = cuir.map %[[S]] at
// P V retires inside the softmax of S_j, which then releases V_{j-1}'s stage and rescales O.
// SM90:            cuir.gemm_wait %[[PV_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:       cuir.mbarrier_arrive %v_empty[%[[PREV_STAGE]]] : !cuir.mbarrier<2>
// SM90:            %[[M_NEW:[a-z0-9_]+]] = cuir.row_reduce max %[[SCORE]] init %[[M]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// SM90:            %[[P:[a-z0-9_]+]] = cuir.map %[[SCORE]], %{{.+}} (
// SM90:            %[[ALPHA:[a-z0-9_]+]] = cuir.map %[[M]], %[[M_NEW]] (
// SM90:            %[[ACC_RESCALED:[a-z0-9_]+]] = cuir.map %[[ACC_PV]], %[[ALPHA]] (
// SM90:            %[[P_BF16:[a-z0-9_]+]] = cuir.convert %[[P]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90-NEXT:       %[[L_RESCALED:[a-z0-9_]+]] = cuir.map %[[L]], %[[M]], %[[M_NEW]] (
// SM90:            %[[L_NEW:[a-z0-9_]+]] = cuir.row_reduce sum %[[P]] init %[[L_RESCALED]] : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
// SM90-NEXT:       scf.yield %[[PV_DONE]], %[[P]], %[[ACC_RESCALED]], %[[P_BF16]], %[[ALPHA]], %[[M_NEW]], %[[L_NEW]], %{{[a-z0-9_]+}} :
// SM90-NEXT:     }
// SM90-NEXT:     cuir.mbarrier_arrive %q_empty : !cuir.mbarrier<1>
// Last P V: issued (O already rescaled by the last step), waited for, its V stage released.
// SM90:          cuir.mbarrier_wait %v_full[%[[LAST_STAGE:[a-z0-9_]+]]], %{{[a-z0-9_]+}} : !cuir.mbarrier<2>
// SM90-NEXT:     cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_fence
// SM90-NEXT:     %[[O_ACC:[a-z0-9_]+]], %[[O_DONE:[a-z0-9_]+]] = cuir.gemm_async ab %[[P_LAST_BF16]], %[[V_SMEM]][%[[LAST_STAGE]]] acc %[[O_LAST]] :
// SM90-NEXT:     cuir.named_barrier_arrive %{{.+}}, 256
// SM90-NEXT:     cuir.gemm_wait %[[O_DONE]] : !cuir.token<@consumer>
// SM90-NEXT:     cuir.mbarrier_arrive %v_empty[%[[LAST_STAGE]]] : !cuir.mbarrier<2>
// Epilogue: LSE, then the previous tile's store is waited for before o_half is overwritten; O is stored
// between two barriers of the group, and only for rows inside the sequence.
// SM90:          %[[LSE:[a-z0-9_]+]] = cuir.map %[[L_LAST]], %[[M_LAST]] (
// SM90:          cuir.store %[[LSE]] -> %lse[{{.+}}] : !cuir.rows<64xf32, @consumer> -> !cuir.global<3 x f32, strided>
// SM90-NEXT:     cuir.wait_group %[[PREV_STORE]] : !cuir.token<@consumer>
// SM90:          cuir.named_barrier_sync %[[EPILOGUE:[a-z0-9_]+]], 128
// SM90:          %[[O_NORMALIZED:[a-z0-9_]+]] = cuir.map %[[O_ACC]], %{{.+}} (
// SM90:          %[[O_BF16:[a-z0-9_]+]] = cuir.convert %[[O_NORMALIZED]] : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// SM90-NEXT:     cuir.store %[[O_BF16]] -> %[[O_SMEM]][%[[GROUP]]] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
// SM90-NEXT:     cuir.fence_async_shared
// SM90-NEXT:     cuir.named_barrier_sync %[[EPILOGUE]], 128
// SM90:          scf.if %{{.+}} -> (!cuir.token<@consumer>) {
// SM90-NEXT:       cuir.store_async %[[O_SMEM]][%[[GROUP]]] -> %o[{{.+}}] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
// SM90-NEXT:       %[[O_STORED:[a-z0-9_]+]] = cuir.commit_group : !cuir.token<@consumer>
// SM90-NEXT:       scf.yield %[[O_STORED]] : !cuir.token<@consumer>
// SM90:          cuir.named_barrier_sync %{{.+}}, 256
// SM90-NEXT:     }
// SM90-NEXT:     cuir.wait_group %[[LAST_STORE]] : !cuir.token<@consumer>
// SM90-NEXT:   }
// SM90-NOT:    cuir.worker

// The race example verifies (the race is a run-time property): in the loop, the mask map reads S before the
// gemm_wait of its token.
// RACE:      cuir.kernel @attention_sm90_bf16_d128_full({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
// RACE:        cuir.worker @producer threads 0 to 128 regs 24
// RACE:        cuir.worker @consumer threads 128 to 384 regs 240
// RACE:          scf.for
// RACE:          cuir.gemm_fence
// RACE-NEXT:     %[[S:.+]], %[[S_DONE:.+]] = cuir.gemm_async abt %q_half[%group], %k_tile[%{{.+}}] : {{.*}} -> !cuir.tile<64x128xf32, @consumer>
// RACE:          cuir.named_barrier_arrive %{{.+}}, 256
// RACE-NOT:      cuir.gemm_wait
// RACE:          scf.if
// RACE-NEXT:       %{{.+}} = cuir.map %[[S]] at
// RACE:          } else {
// RACE-NEXT:       scf.yield %[[S]]
// RACE-NEXT:     }
// RACE-NEXT:     cuir.gemm_wait %[[S_DONE]] : !cuir.token<@consumer>
