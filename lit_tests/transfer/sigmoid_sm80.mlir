// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py %examples/ir/attention_sm80.mlir | filecheck %s

// Sigmoid normalization on the lifted Ampere kernel: P = sigmoid(score) elementwise, as
// 0.5 tanh(score / 2) + 0.5; no rescale factor, no rescaling of the accumulator, no division by the row sum.

// CHECK:      %scores = cuir.gemm abt %q_tile_regs, %k_tiles_regs
// The score is scaled by a map of its own (the exp2 that folded the scale is gone).
// CHECK-NEXT: %scaled = cuir.map %scores at [%c0, %n0]
// CHECK:        arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK:      %[[P:.*]] = cuir.map %scores_1 (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:        math.tanh
// CHECK-NOT:    arith.divf
// CHECK:      } : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xf32, @mma>
// CHECK-NOT:  %correction
// CHECK:      %[[P_BF16:.*]] = cuir.convert %[[P]] : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xbf16, @mma>
// CHECK:      cuir.gemm ab %[[P_BF16]], %v_tiles_regs acc %out_1 :
// CHECK-NOT:  %inverse
// CHECK:      cuir.convert %out_end : !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xbf16, @mma>
