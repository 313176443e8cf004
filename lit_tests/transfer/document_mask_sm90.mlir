// RUN: cuir-opt --transfer=%examples/specs/document_mask.py %examples/ir/attention_sm90.mlir | filecheck %s

// Block lists on the Hopper program: the producer and the consumers walk the same
// positions [0, kv_hi) of "partial tiles, then full tiles", so the pipeline's
// stage and phase counters stay in step. The producer runs one loop; a consumer
// runs the peeled position 0, a masked loop up to full_begin and a mask-free loop.
// Work tiles have block lists of their own lengths: the kernel claims tiles
// dynamically. The tests for an in-flight P V compare positions with the
// consumer loops' first position.

// CHECK:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule dynamic longest_first source "attention_sm90.cu" {
// CHECK:      cuir.worker @producer
// CHECK:        cuir.for_each_tile (%q_tile, %head, %batch)
// CHECK:          %[[NP:.*]] = cuir.gather %kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK:          %[[NF:.*]] = cuir.gather %full_kv_num_blocks[%batch, %head, %q_tile] : !cuir.global<3 x i32, row_major>
// CHECK:          %kv_hi = arith.maxsi
// CHECK:          scf.for %[[J:.*]] = %{{.*}} to %kv_hi step
// CHECK:            cuir.gather %kv_indices[%batch, %head, %q_tile, %[[J]]]
// CHECK:            cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_smem[%stage], barrier %k_full[%stage]
// CHECK-NOT:      scf.for
// CHECK:      cuir.worker @consumer
// CHECK:          %num_visited = arith.addi %num_partial, %{{.*}} : index
// CHECK-NEXT:     %{{.*}} = arith.addi
// CHECK-NEXT:     %[[KV_HI:.*]] = arith.maxsi %num_visited, %{{.*}} : index
// The peeled tile reads position 0 and carries the mask code.
// CHECK:          %first_kv_row{{.*}} = arith.muli
// CHECK:          cuir.gather %document_id
// CHECK:          %full_begin = arith.minsi %{{.*}}, %[[KV_HI]] : index
// Partial tiles: mask code.
// CHECK:          scf.for %[[J1:[a-z0-9_]+]] = %[[FIRST_POS:[a-z0-9_]+]] to %full_begin step
// CHECK:            %pv_in_flight = arith.cmpi ugt, %[[J1]], %[[FIRST_POS]] : index
// CHECK:            cuir.gather %document_id
// Full tiles: no mask code, no bounds check.
// CHECK:          scf.for %[[J2:[a-z0-9_]+]] = %full_begin to %[[KV_HI]] step
// CHECK-NOT:        document_id
// CHECK:            %pv_in_flight_1 = arith.cmpi ugt, %[[J2]], %[[FIRST_POS]] : index
// CHECK-NOT:        document_id
// CHECK-NOT:        arith.cmpi ult
// CHECK:          cuir.mbarrier_arrive %q_empty
// CHECK:          %pv_last_in_flight = arith.cmpi ugt, %[[KV_HI]], %[[FIRST_POS]] : index
