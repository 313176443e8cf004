// RUN: cuir-opt --transfer=%examples/specs/softcap.py %examples/ir/attention_sm90.mlir | filecheck %s

// score_mod lands after the gemm_wait of Q K^T and the scale, before the row max;
// CAP * tanh(score / CAP) with CAP = 2.0. Without a mask every query tile visits
// every kv tile, so the schedule stays persistent.

// CHECK:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
// CHECK:      cuir.gemm_wait %s_first_done : !cuir.token<@consumer>
// CHECK:      %score_first = cuir.map %s_first
// CHECK-NEXT:   %scaled = arith.mulf %x, %softmax_scale : f32
// CHECK-NEXT:   %[[CAP:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   %[[RATIO:.*]] = arith.divf %scaled, %[[CAP]] : f32
// CHECK-NEXT:   %[[TANH:.*]] = math.tanh %[[RATIO]] : f32
// CHECK-NEXT:   %modified = arith.mulf %[[TANH]], %[[CAP]] : f32
// CHECK-NEXT:   %in_bounds = arith.cmpi ult, %ki, %seqlen_kv{{.*}} : index
// CHECK-NEXT:   %score = arith.select %in_bounds, %modified, %neg_inf : f32
// CHECK-NEXT:   cuir.yield %score : f32
// CHECK:      cuir.row_reduce max %score_first init %m_init
// In the kv loop: after the retire of the previous P V and the wait for S_j.
// CHECK:      cuir.gemm_wait %pv_prev_done : !cuir.token<@consumer>
// CHECK:      cuir.gemm_wait %s_done : !cuir.token<@consumer>
// CHECK-NEXT: %score_tile = cuir.map %s
// CHECK-NEXT:   %scaled_1 = arith.mulf %x_2, %softmax_scale : f32
// CHECK-NEXT:   %[[CAP_1:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   %[[RATIO_1:.*]] = arith.divf %scaled_1, %[[CAP_1]] : f32
// CHECK-NEXT:   %[[TANH_1:.*]] = math.tanh %[[RATIO_1]] : f32
// CHECK-NEXT:   %modified_1 = arith.mulf %[[TANH_1]], %[[CAP_1]] : f32
// CHECK:      cuir.row_reduce max %score_tile init %m
