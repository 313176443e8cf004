// RUN: cuir-opt --transfer=%examples/specs/document_mask.py %examples/ir/attention_sm80.mlir | filecheck %s

// A captured tensor becomes a row-major kernel argument read with cuir.gather.
// The mask depends on its data, so the visited kv tiles come from FlexAttention-style
// block lists built before the kernel: per work tile [b, h, q_tile], kv_num_blocks /
// kv_indices (partial tiles) and full_kv_num_blocks / full_kv_indices (full tiles).
// The kv loops run over positions of the sequence "partial tiles, then full tiles";
// each position's tile index is read with cuir.gather.

// CHECK:      cuir.kernel @attention_fwd_sm80({{.*}}, %softmax_scale: f32, %document_id: !cuir.global<1 x i32, row_major>, %kv_num_blocks: !cuir.global<3 x i32, row_major>, %kv_indices: !cuir.global<4 x i32, row_major>, %full_kv_num_blocks: !cuir.global<3 x i32, row_major>, %full_kv_indices: !cuir.global<4 x i32, row_major>)
// CHECK:      cuir.for_each_tile (%q_tile, %head, %batch) {
// CHECK:        %[[NP:.*]] = cuir.gather %kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK-NEXT:   %num_partial = arith.index_cast %[[NP]] : i32 to index
// CHECK-NEXT:   %[[NF:.*]] = cuir.gather %full_kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK-NEXT:   %[[NF_INDEX:.*]] = arith.index_cast %[[NF]] : i32 to index
// CHECK-NEXT:   %num_visited = arith.addi %num_partial, %[[NF_INDEX]] : index
// The K prefetch before the loop loads the tile at position 0.
// CHECK:        %first_kv_row = arith.muli
// CHECK:        cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0]
// CHECK:        %full_begin = arith.minsi %{{.*}}, %num_visited : index
// Partial tiles, with mask code: positions [0, num_partial).
// CHECK:        scf.for %j = %{{.*}} to %full_begin step %c1
// CHECK-NEXT:     %[[IS_PARTIAL:.*]] = arith.cmpi slt, %j, %num_partial : index
// CHECK-NEXT:     %[[PT:.*]] = cuir.gather %kv_indices[%batch, %head, %q_tile, %j] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:     %[[PT_INDEX:.*]] = arith.index_cast %[[PT]] : i32 to index
// CHECK-NEXT:     %[[FULL_POSITION:.*]] = arith.subi %j, %num_partial : index
// CHECK-NEXT:     %[[FT:.*]] = cuir.gather %full_kv_indices[%batch, %head, %q_tile, %[[FULL_POSITION]]] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:     %[[FT_INDEX:.*]] = arith.index_cast %[[FT]] : i32 to index
// CHECK-NEXT:     %kv_tile = arith.select %[[IS_PARTIAL]], %[[PT_INDEX]], %[[FT_INDEX]] : index
// CHECK-NEXT:     %kv_row = arith.muli %kv_tile, %{{.*}} : index
// The K prefetch of the next iteration loads the tile at position j + 1.
// CHECK-NEXT:     %[[NEXT:.*]] = arith.addi %j, %{{.*}} : index
// CHECK:          %kv_tile_1 = arith.select
// CHECK-NEXT:     %kv_row_1 = arith.muli %kv_tile_1, %{{.*}} : index
// CHECK:          cuir.copy_async %v[%batch, %kv_head, %kv_row, %c0]
// CHECK:          %score_tile = cuir.map %s at [%q_row, %kv_row]
// CHECK:          %scaled = arith.mulf %x, %softmax_scale : f32
// CHECK-NEXT:     %[[Q_DOC:.*]] = cuir.gather %document_id[%qi] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:     %[[Q_DOC_INDEX:.*]] = arith.index_cast %[[Q_DOC]] : i32 to index
// CHECK-NEXT:     %[[KV_DOC:.*]] = cuir.gather %document_id[%ki] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:     %[[KV_DOC_INDEX:.*]] = arith.index_cast %[[KV_DOC]] : i32 to index
// CHECK-NEXT:     %[[SAME:.*]] = arith.cmpi eq, %[[Q_DOC_INDEX]], %[[KV_DOC_INDEX]] : index
// CHECK:          %masked = arith.select %[[SAME]], %scaled, %{{.*}} : f32
// CHECK:          cuir.copy_async %k[%batch, %kv_head, %kv_row_1, %c0]
// Full tiles, without mask code: positions [num_partial, num_visited); they end the sequence.
// CHECK:        scf.for %j_1 = %full_begin to %num_visited step %c1
// CHECK:          %kv_tile_2 = arith.select
// CHECK:          %score_tile_1 = cuir.map %s_1 at [%q_row, %kv_row_2]
// CHECK-NOT:      document_id
// CHECK:          %[[FULL_SCORE:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:     cuir.yield %[[FULL_SCORE]] : f32
// CHECK-NOT:    scf.for
// CHECK:        cuir.wait_group
