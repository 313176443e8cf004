// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py %examples/ir/attention_sm90.mlir -o %t
// RUN: filecheck %s --input-file %t
// RUN: not grep alpha %t

// Sigmoid normalization on the FA3-style kernel: P = sigmoid(score) elementwise,
// as 0.5 tanh(score / 2) + 0.5.
// The rescale factors go, and so does the loop-carried alpha that took them to
// the next step: P V accumulates into the carried O as it is, in the loop and
// after it, and the epilogue does not divide by the row sum.

// CHECK:      %p_first = cuir.map %score_first (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:        math.tanh
// CHECK-NOT:    arith.divf
// CHECK:      } : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
// CHECK-NEXT: %l_first = cuir.row_reduce sum %p_first init %l_init :
// CHECK:      %m_last, %l_last, %o_last, %p_last, %pv_last_done, %count_last = scf.for %j_1 = %{{.*}} iter_args(%m = %m_first, %l = %l_first, %acc = %o_zero, %p_prev = %p_first, %pv_prev_done = %s_first_done, %count_1 = %count_after_first) -> (!cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.token<@consumer>, index) {
// CHECK:        %p_prev_bf16 = cuir.convert %p_prev :
// CHECK-NEXT:   cuir.named_barrier_sync
// CHECK-NEXT:   cuir.gemm_fence
// CHECK-NEXT:   %s, %s_done = cuir.gemm_async abt
// CHECK-NEXT:   %acc_pv, %pv_done = cuir.gemm_async ab %p_prev_bf16, %v_smem[%{{.*}}] acc %acc :
// CHECK:        %p = cuir.map %score_tile (%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index) {
// CHECK:        %l_new = cuir.row_reduce sum %p init %l :
// CHECK:        scf.yield %m_new, %l_new, %acc_pv, %p, %pv_done, %{{.*}} :
// CHECK:      %p_last_bf16 = cuir.convert %p_last_{{[0-9]+}} :
// CHECK-NEXT: cuir.named_barrier_sync
// CHECK-NEXT: cuir.gemm_fence
// CHECK-NEXT: %o_acc, %o_done = cuir.gemm_async ab %p_last_bf16, %v_smem[%last_stage] acc %o_last_{{[0-9]+}} :
// CHECK-NOT:  arith.divf %out
// CHECK:      %o_bf16 = cuir.convert %o_acc :
