// RUN: cuir-opt --transfer=%examples/specs/softcap.py %examples/ir/attention_sm90.mlir | filecheck %s

// score_mod on the lifted Hopper program: a map right after the gemm_wait of Q K^T scales the
// scores (the score_mod reads them) and applies CAP * tanh(score / CAP) with CAP = 2.0; the
// lift's bounds branch then masks that map's result, and the exp2 map multiplies by log2 e,
// no longer by the folded scale_log2. Without a mask every query tile visits every kv
// tile, so the schedule stays persistent.
// CHECK:      cuir.kernel @attention_sm90_bf16_d128_full({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu" {
// CHECK:      %log2e = arith.constant 1.44269502 : f32
// CHECK:      cuir.gemm_wait %s_done : !cuir.token<@consumer>
// CHECK-NEXT: %scaled = cuir.map %s at
// CHECK-NEXT:   %[[SCALED:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:   %[[CAP:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   %[[RATIO:.*]] = arith.divf %[[SCALED]], %[[CAP]] : f32
// CHECK-NEXT:   %[[TANH:.*]] = math.tanh %[[RATIO]] : f32
// CHECK-NEXT:   %modified = arith.mulf %[[TANH]], %[[CAP]] : f32
// CHECK-NEXT:   cuir.yield %modified : f32
// CHECK:      %s_1 = scf.if %needs_mask
// CHECK-NEXT:   cuir.map %scaled at
// CHECK:      } else {
// CHECK-NEXT:   scf.yield %scaled
// CHECK:      cuir.row_reduce max %s_1 :
// CHECK:      cuir.map %s_1, %{{.*}} (
// CHECK-NEXT:   arith.mulf %{{.*}}, %log2e : f32
// In the kv loop: after the wait for S_j.
// CHECK:      cuir.gemm_wait %s_done_1 : !cuir.token<@consumer>
// CHECK-NEXT: cuir.mbarrier_arrive %k_empty
// CHECK-NEXT: %scaled_1 = cuir.map %s_5 at
// CHECK-NEXT:   %[[SCALED_1:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:   %[[CAP_1:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   %[[RATIO_1:.*]] = arith.divf %[[SCALED_1]], %[[CAP_1]] : f32
// CHECK-NEXT:   %[[TANH_1:.*]] = math.tanh %[[RATIO_1]] : f32
// CHECK-NEXT:   %modified_1 = arith.mulf %[[TANH_1]], %[[CAP_1]] : f32
// CHECK:      cuir.row_reduce max %s_6 init %max_1
