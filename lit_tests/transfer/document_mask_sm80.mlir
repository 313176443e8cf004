// RUN: cuir-opt --transfer=%examples/specs/document_mask.py %examples/ir/attention_sm80.mlir | filecheck %s

// A captured tensor becomes a row-major kernel argument read with cuir.gather.
// The mask depends on its data, so the visited kv tiles come from FlexAttention-style
// block lists built before the kernel: per work tile [b, h, q_tile], kv_num_blocks /
// kv_indices (partial tiles) and full_kv_num_blocks / full_kv_indices (full tiles).
// The lift's one kv loop runs over positions of the sequence "partial tiles, then full tiles";
// each position's tile index is read with cuir.gather, and its mask branch runs on the partial ones.

// CHECK:      cuir.kernel @attention_sm80_bf16_d128_full({{.*}}, %softmax_scale: f32, %document_id: !cuir.global<1 x i32, row_major>, %kv_num_blocks: !cuir.global<3 x i32, row_major>, %kv_indices: !cuir.global<4 x i32, row_major>, %full_kv_num_blocks: !cuir.global<3 x i32, row_major>, %full_kv_indices: !cuir.global<4 x i32, row_major>)
// CHECK:      cuir.for_each_tile (%[[Q_TILE:.*]], %head, %batch) {
// CHECK:        %[[NP:.*]] = cuir.gather %kv_num_blocks[%batch, %head, %[[Q_TILE]]] : !cuir.global<3 x i32, row_major>
// CHECK-NEXT:   %num_partial = arith.index_cast %[[NP]] : i32 to index
// CHECK-NEXT:   %[[NF:.*]] = cuir.gather %full_kv_num_blocks[%batch, %head, %[[Q_TILE]]] : !cuir.global<3 x i32, row_major>
// CHECK-NEXT:   %[[NF_INDEX:.*]] = arith.index_cast %[[NF]] : i32 to index
// CHECK-NEXT:   %num_visited = arith.addi %num_partial, %[[NF_INDEX]] : index
// The prologue loads K and V of the tile at position 0.
// CHECK:        %first_kv_row = arith.muli
// CHECK:        cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0]
// CHECK:        cuir.copy_async %v[%batch, %kv_head, %first_kv_row, %c0]
// CHECK:        scf.for %j = %[[FIRST:.*]] to %num_visited step %c1
// CHECK-NEXT:     %[[IS_PARTIAL:.*]] = arith.cmpi slt, %j, %num_partial : index
// CHECK-NEXT:     %[[PT:.*]] = cuir.gather %kv_indices[%batch, %head, %[[Q_TILE]], %j] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:     %[[PT_INDEX:.*]] = arith.index_cast %[[PT]] : i32 to index
// CHECK-NEXT:     %[[FULL_POSITION:.*]] = arith.subi %j, %num_partial : index
// CHECK-NEXT:     %[[FT:.*]] = cuir.gather %full_kv_indices[%batch, %head, %[[Q_TILE]], %[[FULL_POSITION]]] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:     %[[FT_INDEX:.*]] = arith.index_cast %[[FT]] : i32 to index
// CHECK-NEXT:     %kv_tile = arith.select %[[IS_PARTIAL]], %[[PT_INDEX]], %[[FT_INDEX]] : index
// CHECK-NEXT:     %kv_row = arith.muli %kv_tile, %{{.*}} : index
// The prefetch of the next K and V tiles loads the tile at position j + 1, while j + 1 < num_visited.
// CHECK-NEXT:     %[[NEXT:.*]] = arith.addi %j, %{{.*}} : index
// CHECK:          %kv_tile_1 = arith.select
// CHECK-NEXT:     %kv_row_1 = arith.muli %kv_tile_1, %{{.*}} : index
// CHECK:          %has_next = arith.cmpi slt, %{{.*}}, %num_visited : index
// CHECK:          cuir.copy_async %k[%batch, %kv_head, %kv_row_1, %c0]
// CHECK:          cuir.copy_async %v[%batch, %kv_head, %kv_row_1, %c0]
// Partial tiles (positions before num_partial) take the mask branch; full ones skip it.
// CHECK:          %[[BEFORE:.*]] = arith.cmpi slt, %j, %num_partial : index
// CHECK-NEXT:     %[[AFTER:.*]] = arith.cmpi sge, %j, %num_visited : index
// CHECK-NEXT:     %needs_mask = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// CHECK-NEXT:     %scores_1 = scf.if %needs_mask
// CHECK-NEXT:       cuir.map %scores at [%q_row, %kv_row] (%[[X:[^:]+]]: f32, %[[QI:[^:]+]]: index, %[[KI:[^:]+]]: index) {
// CHECK-NEXT:         %[[Q_DOC:.*]] = cuir.gather %document_id[%[[QI]]] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:         %[[Q_DOC_INDEX:.*]] = arith.index_cast %[[Q_DOC]] : i32 to index
// CHECK-NEXT:         %[[KV_DOC:.*]] = cuir.gather %document_id[%[[KI]]] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:         %[[KV_DOC_INDEX:.*]] = arith.index_cast %[[KV_DOC]] : i32 to index
// CHECK-NEXT:         %[[SAME:.*]] = arith.cmpi eq, %[[Q_DOC_INDEX]], %[[KV_DOC_INDEX]] : index
// CHECK:              %masked = arith.select %[[SAME]], %[[X]], %{{.*}} : f32
// CHECK:            } else {
// CHECK-NEXT:         scf.yield %scores :
// CHECK-NOT:    scf.for
// CHECK:        cuir.wait_group %copy_group_0_end
