// RUN: cuir-opt --transfer=%examples/specs/document_mask.py %examples/ir/attention_sm90.mlir | filecheck %s

// Block lists on the lifted Hopper program: the producer and the consumers walk the same
// positions [0, kv_hi) of "partial tiles, then full tiles", so the pipeline's stage and
// phase counters stay in step; the kv tile at a position is read from the lists. A
// consumer runs position 0 before its loop and the loop from position 1; the mask code
// stays in the lift's scf.if, whose test becomes "position outside [num_partial,
// num_visited)": full tiles run no mask. Work tiles have block lists of their own
// lengths: the kernel claims tiles dynamically, and skips those whose lists are both
// empty (skip_empty), so no tile is forced on them. The tests for an in-flight P V
// compare positions with the loop's first position.

// CHECK:      cuir.kernel @attention_sm90_bf16_d128_full({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule dynamic longest_first skip_empty source "attention_sm90.cu" {
// CHECK:      cuir.worker @producer
// CHECK:        cuir.for_each_tile (%q_tile, %head, %batch)
// CHECK:          %[[NP:.*]] = cuir.gather %kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK:          %[[NF:.*]] = cuir.gather %full_kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK-NEXT:     %{{.*}} = arith.index_cast
// CHECK-NEXT:     %kv_hi = arith.addi
// CHECK:          scf.for %[[J:[a-z0-9_]+]] = %{{.*}} to %kv_hi step
// CHECK:            %[[NEXT:[0-9]+]] = arith.addi %[[J]], %{{.*}} : index
// CHECK:            cuir.gather %kv_indices[%batch, %head, %q_tile, %[[NEXT]]]
// CHECK:            cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_tile[%stage], barrier %k_full[%stage]
// CHECK-NOT:      scf.for
// CHECK:      cuir.worker @consumer
// CHECK:          %num_partial = arith.index_cast %{{.*}} : i32 to index
// CHECK:          %num_visited = arith.addi %num_partial, %{{.*}} : index
// Position 0: its mask runs where the position is not a full tile.
// CHECK:          cuir.gemm_wait %s_done
// CHECK-NEXT:     %{{.*}} = arith.cmpi slt, %[[FIRST:[0-9]+]], %num_partial : index
// CHECK-NEXT:     %{{.*}} = arith.cmpi sge, %[[FIRST]], %num_visited : index
// CHECK-NEXT:     %needs_mask = arith.ori
// CHECK-NEXT:     scf.if %needs_mask
// CHECK-NEXT:       cuir.map %s at [%q_row, %first_kv_row_1]
// CHECK-NEXT:         cuir.gather %document_id
// The loop from position 1 to kv_hi looks each tile up in the partial, then the full list.
// CHECK:          %[[SECOND:[0-9]+]] = arith.addi %[[FIRST]], %{{.*}} : index
// CHECK-NEXT:     scf.for %[[J1:[a-z0-9_]+]] = %[[SECOND]] to %num_visited step
// CHECK-NEXT:       arith.cmpi slt, %[[J1]], %num_partial : index
// CHECK-NEXT:       cuir.gather %kv_indices[%batch_1, %head_1, %q_tile_1, %[[J1]]]
// CHECK:            cuir.gather %full_kv_indices
// CHECK:            %kv_row_2 = arith.muli
// CHECK:            %{{.*}} = arith.cmpi slt, %[[J1]], %num_partial : index
// CHECK-NEXT:       %{{.*}} = arith.cmpi sge, %[[J1]], %num_visited : index
// CHECK-NEXT:       %needs_mask_1 = arith.ori
// CHECK-NEXT:       scf.if %needs_mask_1
// CHECK-NEXT:         cuir.map %s_5 at [%q_row, %kv_row_2]
// CHECK-NEXT:           cuir.gather %document_id
// CHECK:          cuir.mbarrier_arrive %q_empty
