// RUN: cuir-opt --lift --transfer=%examples/specs/document_mask.py --lower %S/../../cubridge/runtime/kernels/attention_sm90.cu -o %t.cu 2>/dev/null
// RUN: cuir-opt --lift %t.cu 2>/dev/null | filecheck %s
// RUN: cuir-opt --lift %t.cu 2>/dev/null | cuir-run - --spec %examples/specs/document_mask.py --schedules 1 | filecheck %s --check-prefix=VERIFIED
//
// A lowered block-list variant lifts back. Its policy's block lists are tables of its Args, so kernel arguments;
// kSkipsEmptyTiles is the header's skip_empty (the producer's claim past empty tiles is how the kernel
// implements it), under the dynamic schedule; the runtime's mask bits (kMaskBits) are no argument: keep()
// defines them. Both roles read the counts for their kv range and each position's kv tile from the lists.
// CHECK:      cuir.kernel @attention_sm90_bf16_d128_document_mask(
// CHECK-SAME:   %document_id: !cuir.global<1 x i32, row_major>, %kv_num_blocks: !cuir.global<3 x i32, row_major>, %kv_indices: !cuir.global<4 x i32, row_major>, %full_kv_num_blocks: !cuir.global<3 x i32, row_major>, %full_kv_indices: !cuir.global<4 x i32, row_major>)
// CHECK-NOT:    mask_bits
// CHECK-SAME:   schedule dynamic longest_first skip_empty
// CHECK:      cuir.worker @producer
// CHECK:        cuir.gather %kv_num_blocks[%batch, %head, %q_tile]
// CHECK:        cuir.gather %full_kv_num_blocks[%batch, %head, %q_tile]
// CHECK:        scf.for %j = %c0 to %num_visited
// CHECK:          cuir.gather %kv_indices[%batch, %head, %q_tile,
// CHECK:          cuir.gather %full_kv_indices[%batch, %head, %q_tile,
// CHECK:      cuir.worker @consumer
// CHECK:        cuir.gather %kv_num_blocks[
// CHECK:        cuir.gather %full_kv_num_blocks[
// CHECK:        cuir.gather %document_id[
// VERIFIED: cuir-run: verified:
