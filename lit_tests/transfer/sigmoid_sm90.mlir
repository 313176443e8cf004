// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py %examples/ir/attention_sm90.mlir -o %t
// RUN: filecheck %s --input-file %t
// RUN: not grep alpha %t
// Sigmoid normalization on the lifted Hopper program: the scores are scaled first (a
// score_mod reads them), then P = sigmoid(score) elementwise, as 0.5 tanh(score / 2) + 0.5,
// in place of the exp2 map. The rescale factors go, and so does the loop-carried alpha
// that took them to the next step: P V accumulates into the carried O as it is, in the
// loop and after it, and the epilogue does not divide by the row sum.
// CHECK:      %scaled = cuir.map %s at
// CHECK-NEXT:   %{{.*}} = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK:        %modified = arith.addf
// CHECK:      %s_1 = scf.if %needs_mask
// CHECK-NEXT:   cuir.map %scaled at
// CHECK:      %[[P0:s_[0-9]+]] = cuir.map %s_1 (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:        math.tanh
// CHECK-NOT:    math.exp2
// CHECK:      } : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK:      %probs = cuir.convert %[[P0]] :
// CHECK:      %sum = cuir.row_reduce sum %[[P0]] init
// CHECK:      %gemm_group_end, %s_end, %o_end, %probs_end, %max_end, %sum_end, %count_end_3 = scf.for %j_1 = %{{.*}} iter_args(%gemm_group = %s_done, %{{s_[0-9]+}} = %[[P0]], %[[ACC:o_[0-9]+]] = %o_1, %[[P_PREV:probs_[0-9]+]] = %probs, %max_1 = %max, %sum_1 = %sum, %{{.*}} = %{{.*}})
// CHECK:        %s_5, %s_done_1 = cuir.gemm_async abt
// CHECK-NEXT:   %o_3, %o_done = cuir.gemm_async ab %[[P_PREV]], %v_tile[%{{.*}}] acc %[[ACC]] :
// CHECK:        %[[P:s_[0-9]+]] = cuir.map %s_6 (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:          math.tanh
// CHECK:        %[[P_BF16:probs_[0-9]+]] = cuir.convert %[[P]] :
// CHECK:        %sum_2 = cuir.row_reduce sum %[[P]] init
// CHECK:        scf.yield %o_done, %[[P]], %o_3, %[[P_BF16]], %max_2, %sum_2, %{{.*}} :
// CHECK:      %o_4, %o_done_1 = cuir.gemm_async ab %probs_end, %v_tile[%{{.*}}] acc %o_end :
// CHECK-NOT:  arith.divf
// CHECK:      %{{.*}} = cuir.convert %o_4 :
