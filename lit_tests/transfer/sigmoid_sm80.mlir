// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py %examples/ir/attention_sm80.mlir | filecheck %s

// Sigmoid normalization: P = sigmoid(score) elementwise, as
// 0.5 tanh(score / 2) + 0.5; no rescale factor,
// no rescaling of the accumulator, no division by the row sum.

// CHECK:      %p = cuir.map %score_tile (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:        math.tanh
// CHECK-NOT:    arith.divf
// CHECK:      } : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xf32, @mma>
// CHECK-NOT:  %alpha
// CHECK:      %acc_new = cuir.gemm ab %p_bf16, %v_regs acc %acc :
// CHECK-NOT:  arith.divf %out
// CHECK:      %o_bf16 = cuir.convert %o_last_{{[0-9]+}} :
