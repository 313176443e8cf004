// RUN: cuir-opt --transfer=%examples/specs/softcap.py %examples/ir/attention_sm90.mlir | filecheck %s

// score_mod lands after the gemm_wait of Q K^T and the scale, before the row max;
// CAP * tanh(score / CAP) with CAP = 2.0.

// CHECK:      cuir.gemm_wait %s_first_done : !cuir.token<@consumer>
// CHECK:      %score_first = cuir.map %s_first
// CHECK-NEXT:   %scaled = arith.mulf %x, %softmax_scale : f32
// CHECK-NEXT:   %[[CAP:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   %[[RATIO:.*]] = arith.divf %scaled, %[[CAP]] : f32
// CHECK-NEXT:   %[[TANH:.*]] = math.tanh %[[RATIO]] : f32
// CHECK-NEXT:   %modified = arith.mulf %[[CAP]], %[[TANH]] : f32
// CHECK-NEXT:   %in_bounds = arith.cmpi ult, %ki, %seqlen_kv{{.*}} : index
// CHECK-NEXT:   %score = arith.select %in_bounds, %modified, %neg_inf : f32
// CHECK-NEXT:   cuir.yield %score : f32
// CHECK:      cuir.row_reduce max %score_first
