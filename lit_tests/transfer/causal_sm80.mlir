// RUN: cuir-opt --transfer=%examples/specs/causal.py %examples/ir/attention_sm80.mlir | filecheck %s

// Causal on the FA2-style kernel (the lift of attention_sm80.cu): closed-form kv bounds per query tile, the kv
// loop and its prologue over the visited tiles only, and the mask in the lift's mask branch, which runs on the
// tiles outside the mask-free range [0, full_end).

// Rows [q_first, q_last] of this work tile; the last kept kv column is
// min(seqlen_kv - 1, q_last), so kv tiles [0, min(seqlen_kv - 1, q_last) / 64 + 1).
// CHECK:      cuir.for_each_tile (%[[Q_TILE:.*]], %head, %batch) {
// CHECK:        %q_first = arith.muli %[[Q_TILE]], %[[TILE_M:.*]] : index
// CHECK:        %[[ROWS_END:.*]] = arith.minsi %{{.*}}, %seqlen_q : index
// CHECK:        %q_last = arith.subi %[[ROWS_END]], %[[ONE:.*]] : index
// CHECK:        %[[LAST_KV:.*]] = arith.addi %seqlen_kv, %{{.*}} : index
// CHECK:        %[[LAST_KEPT:.*]] = arith.minsi %[[LAST_KV]], %q_last : index
// CHECK:        %[[KV_TILES:.*]] = arith.ceildivsi %seqlen_kv, %[[BN:.*]] : index
// CHECK:        %kv_lo = arith.select %{{.*}}, %[[ZERO:.*]], %[[KV_TILES]] : index
// CHECK:        %[[HI_TILE:.*]] = arith.floordivsi %[[LAST_KEPT]], %[[BN]] : index
// CHECK:        %[[HI:.*]] = arith.addi %[[HI_TILE]], %[[ONE]] : index
// CHECK:        %kv_hi = arith.select %{{.*}}, %[[HI]], %[[ZERO]] : index
// CHECK:        %first_kv_row = arith.muli %kv_lo, %[[BN]] : index
// Full tiles end where the first row's kept columns end: (min(seqlen_kv - 1, q_first) + 1) / 64.
// CHECK:        %[[FIRST_KEPT:.*]] = arith.minsi %[[LAST_KV]], %q_first : index
// CHECK:        %[[FIRST_END:.*]] = arith.addi %[[FIRST_KEPT]], %[[ONE]] : index
// CHECK:        %full_end = arith.floordivsi %[[FIRST_END]], %[[BN]] : index
// The prologue loads K and V of the first visited tile.
// CHECK:        cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0] -> %k_tiles[%c0]
// CHECK:        cuir.copy_async %v[%batch, %kv_head, %first_kv_row, %c0] -> %v_tiles[%c0]

// One kv loop over the visited tiles; its prefetch stops at kv_hi.
// CHECK:        scf.for %j = %kv_lo to %kv_hi step %c1
// CHECK:          %has_next = arith.cmpi slt, %kv_tile, %kv_hi : index
// CHECK:          %scores = cuir.gemm abt %q_tile_regs, %k_tiles_regs
// The mask branch runs before the first mask-free tile (0 for causal) and from full_end on.
// CHECK-NEXT:     %[[BEFORE:.*]] = arith.cmpi slt, %j, %[[ZERO]] : index
// CHECK-NEXT:     %[[AFTER:.*]] = arith.cmpi sge, %j, %full_end : index
// CHECK-NEXT:     %needs_mask = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// CHECK-NEXT:     %scores_1 = scf.if %needs_mask -> (!cuir.tile<128x64xf32, @mma>) {
// The mask (q_idx >= kv_idx) precedes the lift's bounds test; the scale stays folded into the exp2.
// CHECK-NEXT:       %scores_2 = cuir.map %scores at [%q_row, %n0] (%[[X:[^:]+]]: f32, %[[QI:[^:]+]]: index, %[[KI:[^:]+]]: index) {
// CHECK-NEXT:         %[[KEEP:.*]] = arith.cmpi sge, %[[QI]], %[[KI]] : index
// CHECK-NEXT:         %[[MINUS_INF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:         %masked = arith.select %[[KEEP]], %[[X]], %[[MINUS_INF]] : f32
// CHECK-NEXT:         %[[PAST:.*]] = arith.cmpi sge, %[[KI]], %seqlen_k : index
// CHECK-NEXT:         %{{.*}} = arith.constant 0xff800000 : f32
// CHECK-NEXT:         %[[SCORE:.*]] = arith.select %[[PAST]], %{{.*}}, %masked : f32
// CHECK-NEXT:         cuir.yield %[[SCORE]] : f32
// CHECK:            } else {
// CHECK-NEXT:         scf.yield %scores : !cuir.tile<128x64xf32, @mma>
// CHECK:          %block_max = cuir.row_reduce max %scores_1
// CHECK-NOT:    scf.for
// CHECK:        cuir.wait_group %copy_group_0_end
