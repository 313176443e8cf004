// RUN: cuir-opt --lift --transfer=%examples/specs/sigmoid.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=SIGMOID
// RUN: cuir-opt --lift --transfer=%examples/specs/sigmoid.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | cuir-run - --spec %examples/specs/sigmoid.py --shape 1,2,1,129,200,64 --seed 0 --schedules 1 | filecheck %s --check-prefix=VERDICT
// RUN: cuir-opt --lift --transfer=%examples/specs/sigmoid.py --lower %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=LOWER
//
// A sigmoid normalization on the lifted Ampere kernel: the scores are scaled (and the spec's bias added) before
// the mask branch, P = sigmoid(score) replaces the exp2 map, O is neither rescaled nor divided by the row sums.

// SIGMOID:      %scaled = cuir.map %scores at [%c0, %n0] (%[[X:[^:]+]]: f32, %{{.*}}: index, %{{.*}}: index) {
// SIGMOID-NEXT:   arith.mulf %[[X]], %softmax_scale : f32
// SIGMOID:        %modified = arith.addf
// SIGMOID:      %scores_1 = scf.if %needs_mask
// SIGMOID:      %scores_3 = cuir.map %scores_1 (%[[S:[^:]+]]: f32, %{{.*}}: index, %{{.*}}: index) {
// SIGMOID-NOT:    math.exp2
// SIGMOID:        math.tanh
// SIGMOID:      } : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xf32, @mma>
// SIGMOID-NOT:  %correction
// SIGMOID:      %[[P:.*]] = cuir.convert %scores_3
// SIGMOID:      cuir.gemm ab %[[P]], %v_tiles_regs acc %out_1 :
// SIGMOID:      %[[O:.*]] = cuir.convert %out_end
// SIGMOID-NEXT: cuir.store %[[O]] -> %q_tile

// VERDICT: cuir-run: verified:

// LOWER:      struct SigmoidVariant : FullAttention {
// LOWER-NEXT:   static constexpr bool kModifiesScores = true;
// LOWER-NEXT:   static constexpr bool kSoftmax = false;
// LOWER:        __device__ static float activate(float score) {
// LOWER-NEXT:     const float v = 0.5f * score;  // sigmoid.py:5
// LOWER:      CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_sigmoid, __nv_bfloat16, 64, 64, SigmoidVariant)
