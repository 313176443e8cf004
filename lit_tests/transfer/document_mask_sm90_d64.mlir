// RUN: cuir-opt --lift=attention_sm90_bf16_d64_full --transfer=%examples/specs/document_mask.py %S/../../cubridge/runtime/kernels/attention_sm90.cu | filecheck %s

// The document mask on the lift of the Hopper kernel's D = 64 entry point, whose producer loads V one kv step
// behind K: K of position j, then V of position j - 1 (the row the loop carried from the step before), and V of
// the last position after the loop. The transfer runs the loop over positions of the block lists from kv_lo: it
// looks up the kv tile of the next position for K's carried row, starts both carried rows at the first visited
// tile's, compares the step tests with kv_lo, and leaves the trailing row to the loop.

// CHECK:      cuir.worker @producer
// CHECK:        %first_kv_row = arith.muli
// CHECK:        %kv_row_end, %behind_row_end, %count_end_1 = scf.for %j = %[[LO:.*]] to %kv_hi step %c1 iter_args(%kv_row = %first_kv_row, %behind_row = %first_kv_row, %count_1 = %count)
// CHECK:          %kv_tile = arith.select
// CHECK-NEXT:     %[[NEXT:.*]] = arith.muli %kv_tile, %{{.*}} : index
// CHECK:          cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_tile[%stage]
// CHECK-NEXT:     %[[LATER:.*]] = arith.cmpi sgt, %j, %[[LO]] : index
// CHECK-NEXT:     scf.if %[[LATER]] {
// CHECK:            cuir.copy_async %v[%batch, %kv_head, %behind_row, %c0] -> %v_tile[%stage_1]
// CHECK:          scf.yield %[[NEXT]], %kv_row, %count_3 : index, index, index
// CHECK:        %[[RAN:.*]] = arith.cmpi sgt, %kv_hi, %[[LO]] : index
// CHECK-NEXT:   scf.if %[[RAN]] {
// CHECK:          cuir.copy_async %v[%batch, %kv_head, %behind_row_end, %c0] -> %v_tile[%stage_2]
// CHECK:      cuir.worker @consumer
