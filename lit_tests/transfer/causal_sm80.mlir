// RUN: cuir-opt --transfer=%examples/specs/causal.py %examples/ir/attention_sm80.mlir | filecheck %s

// Causal on the FA2-style kernel: closed-form kv bounds per query tile, the
// kv loop split into masked / mask-free / masked parts, and the mask inserted
// after the Q K^T gemm and the scale, before the row max.

// Rows [q_first, q_last] of this work tile; the last kept kv column is
// min(seqlen_kv - 1, q_last), so kv tiles [0, min(seqlen_kv - 1, q_last) / 64 + 1).
// CHECK:      cuir.for_each_tile (%q_tile, %head, %batch) {
// CHECK:        %q_first = arith.muli %q_tile, %[[TILE_M:.*]] : index
// CHECK:        %[[ROWS_END:.*]] = arith.minsi %{{.*}}, %seqlen_q : index
// CHECK:        %q_last = arith.subi %[[ROWS_END]], %[[ONE:.*]] : index
// CHECK:        %[[LAST_KV:.*]] = arith.addi %seqlen_kv_1, %{{.*}} : index
// CHECK:        %[[LAST_KEPT:.*]] = arith.minsi %[[LAST_KV]], %q_last : index
// CHECK:        %[[KV_TILES:.*]] = arith.ceildivsi %seqlen_kv_1, %[[BN:.*]] : index
// CHECK:        %kv_lo = arith.select %{{.*}}, %[[ZERO:.*]], %[[KV_TILES]] : index
// CHECK:        %[[HI_TILE:.*]] = arith.floordivsi %[[LAST_KEPT]], %[[BN]] : index
// CHECK:        %[[HI:.*]] = arith.addi %[[HI_TILE]], %[[ONE]] : index
// CHECK:        %kv_hi = arith.select %{{.*}}, %[[HI]], %[[ZERO]] : index
// The K prefetch before the loop loads the first visited tile.
// CHECK:        %first_kv_row = arith.muli %kv_lo, %[[BN]] : index
// CHECK:        cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0] -> %k_smem
// Full tiles end where the first row's kept columns end: (min(seqlen_kv - 1, q_first) + 1) / 64.
// CHECK:        %[[FIRST_KEPT:.*]] = arith.minsi %[[LAST_KV]], %q_first : index
// CHECK:        %[[FIRST_END:.*]] = arith.addi %[[FIRST_KEPT]], %[[ONE]] : index
// CHECK:        %full_hi = arith.floordivsi %[[FIRST_END]], %[[BN]] : index
// CHECK:        %full_begin = arith.minsi %{{.*}}, %kv_hi : index
// CHECK:        %full_end = arith.minsi %{{.*}}, %kv_hi : index

// Masked head loop: the mask follows the scale and precedes the bounds check and the row max.
// CHECK:        scf.for %j = %kv_lo to %full_begin step %c1
// CHECK:          %s = cuir.gemm abt %q_regs, %k_regs
// CHECK-NEXT:     %score_tile = cuir.map %s at [%q_row, %kv_row] (%x: f32, %qi: index, %ki: index) {
// CHECK-NEXT:       %scaled = arith.mulf %x, %softmax_scale : f32
// CHECK-NEXT:       %[[KEEP:.*]] = arith.cmpi sge, %qi, %ki : index
// CHECK-NEXT:       %[[MINUS_INF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:       %masked = arith.select %[[KEEP]], %scaled, %[[MINUS_INF]] : f32
// CHECK-NEXT:       %in_bounds = arith.cmpi ult, %ki, %seqlen_kv : index
// CHECK-NEXT:       %score = arith.select %in_bounds, %masked, %neg_inf : f32
// CHECK-NEXT:       cuir.yield %score : f32
// CHECK:          cuir.row_reduce max %score_tile init %m

// Full tiles: no mask and no bounds check, only the scaled score.
// CHECK:        scf.for %j_1 = %full_begin to %full_end step %c1
// CHECK:          cuir.map %s_1 at [%q_row, %kv_row_1] (%x_2: f32, %qi_1: index, %ki_1: index) {
// CHECK-NEXT:       %scaled_1 = arith.mulf %x_2, %softmax_scale : f32
// CHECK-NEXT:       cuir.yield %scaled_1 : f32
// CHECK-NEXT:     }

// Masked tail loop, up to the last visited tile.
// CHECK:        scf.for %j_2 = %full_end to %kv_hi step %c1
// CHECK:            arith.cmpi sge, %qi_2, %ki_2 : index
