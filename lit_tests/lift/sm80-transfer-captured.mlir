// RUN: cuir-opt --lift --transfer=%examples/specs/document_mask.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=LISTS
// RUN: cuir-opt --lift --transfer=%examples/specs/document_mask.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | cuir-run - --spec %examples/specs/document_mask.py --shape 2,2,1,257,257,64 --seed 0 --schedules 1 | filecheck %s --check-prefix=VERDICT
// RUN: cuir-opt --lift --transfer=%examples/specs/document_mask.py --lower %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=LOWER
//
// A mask that reads a captured tensor (document_id) on the lifted Ampere kernel: the tensor becomes a kernel
// argument read with cuir.gather, and the kv loop walks positions of block lists (partial tiles, then full
// ones) built before the kernel; the kv rows of the loads (the next tile's too) and of the score map are the
// tiles at those positions, and the end test and the stage count positions.

// LISTS:      %softmax_scale: f32, %document_id: !cuir.global<1 x i32, row_major>, %kv_num_blocks: !cuir.global<3 x i32, row_major>, %kv_indices: !cuir.global<4 x i32, row_major>, %full_kv_num_blocks: !cuir.global<3 x i32, row_major>, %full_kv_indices: !cuir.global<4 x i32, row_major>)
// LISTS:      %num_partial = arith.index_cast
// LISTS:      %num_visited = arith.addi %num_partial, %{{.*}} : index
// LISTS:      %first_kv_row = arith.muli
// LISTS:      cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0] -> %k_tiles[%c0]
// LISTS:      cuir.copy_async %v[%batch, %kv_head, %first_kv_row, %c0] -> %v_tiles[%c0]
// LISTS:      scf.for %j = %[[ZERO:.*]] to %num_visited step %c1
// LISTS:        cuir.gather %kv_indices[%batch, %head, %q_tile_1, %j]
// LISTS:        %kv_row = arith.muli %kv_tile, %{{.*}} : index
// LISTS:        %[[NEXT:.*]] = arith.addi %j, %{{.*}} : index
// LISTS:        cuir.gather %kv_indices[%batch, %head, %q_tile_1, %[[NEXT]]]
// LISTS:        %kv_row_1 = arith.muli %kv_tile_1, %{{.*}} : index
// LISTS:        %step = arith.subi %j, %[[ZERO]] : index
// LISTS-NEXT:   %stage = arith.remsi %step, %c2 : index
// LISTS:        %has_next = arith.cmpi slt, %{{.*}}, %num_visited : index
// LISTS:        cuir.copy_async %k[%batch, %kv_head, %kv_row_1, %c0]
// LISTS:        cuir.copy_async %v[%batch, %kv_head, %kv_row_1, %c0]
// The partial tiles are masked: keep() reads document_id at both indices.
// LISTS:        %[[PARTIAL:.*]] = arith.cmpi slt, %j, %num_partial : index
// LISTS-NEXT:   %[[PAST:.*]] = arith.cmpi sge, %j, %num_visited : index
// LISTS-NEXT:   %needs_mask = arith.ori %[[PARTIAL]], %[[PAST]] : i1
// LISTS-NEXT:   scf.if %needs_mask
// LISTS-NEXT:     cuir.map %scores at [%q_row, %kv_row] (%[[X:[^:]+]]: f32, %[[Q:[^:]+]]: index, %[[KV:[^:]+]]: index) {
// LISTS-NEXT:       cuir.gather %document_id[%[[Q]]] : !cuir.global<1 x i32, row_major>
// LISTS:            cuir.gather %document_id[%[[KV]]] : !cuir.global<1 x i32, row_major>
// LISTS:            %masked = arith.select %{{.*}}, %[[X]], %{{.*}} : f32

// VERDICT: cuir-run: verified:

// LOWER:      struct DocumentMaskVariant : FullAttention {
// LOWER:        struct Args {
// LOWER-NEXT:     Table<int, 1> document_id;
// LOWER:        return KvRange{0, num_visited, num_partial, num_visited};
// LOWER:        __device__ static int kv_tile(
// LOWER:      CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_document_mask, __nv_bfloat16, 64, 64, DocumentMaskVariant)
