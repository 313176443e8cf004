// RUN: cuir-opt --lift --transfer=%examples/specs/softcap.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=SCORE
// RUN: cuir-opt --lift --transfer=%examples/specs/softcap.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | cuir-run - --spec %examples/specs/softcap.py --shape 1,2,1,129,200,64 --seed 1 --schedules 1 | filecheck %s --check-prefix=VERDICT
// RUN: cuir-opt --lift --transfer=%examples/specs/softcap.py --lower %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=LOWER
//
// A score_mod on the lifted Ampere kernel, which folds the softmax scale into its exp2 (scale_log2): a map scales
// the scores before the mask branch and applies score_mod; the exp2 multiplies by log2 e, and the LSE takes the
// running row max as it is.

// SCORE:      %log2e = arith.constant 1.44269502 : f32
// SCORE-NOT:  %scale_log2
// SCORE:      %scores = cuir.gemm abt %q_tile_regs, %k_tiles_regs
// SCORE-NEXT: %scaled = cuir.map %scores at [%c0, %n0] (%[[X:[^:]+]]: f32, %{{.*}}: index, %{{.*}}: index) {
// SCORE-NEXT:   %[[SCALED:.*]] = arith.mulf %[[X]], %softmax_scale : f32
// SCORE:        %modified = arith.mulf
// SCORE-NEXT:   cuir.yield %modified : f32
// SCORE:      %scores_1 = scf.if %needs_mask -> (!cuir.tile<128x64xf32, @mma>) {
// SCORE-NEXT:   %scores_2 = cuir.map %scaled at
// SCORE:      } else {
// SCORE-NEXT:   scf.yield %scaled : !cuir.tile<128x64xf32, @mma>
// SCORE:      %block_max = cuir.row_reduce max %scores_1
// SCORE:      cuir.map %scores_1, %{{.*}} (%[[P:[^:]+]]: f32,
// SCORE-NEXT:   arith.mulf %[[P]], %log2e : f32
// SCORE:      %row_lse = cuir.map %row_max_end, %row_sum_end (%[[MAX:[^:]+]]: f32, %[[SUM:[^:]+]]: f32, %{{.*}}: index) {
// SCORE-NEXT:   %[[LOG:.*]] = math.log %[[SUM]] : f32
// SCORE-NEXT:   arith.addf %[[MAX]], %[[LOG]] : f32

// VERDICT: cuir-run: verified:

// LOWER:      struct SoftcapVariant : FullAttention {
// LOWER-NEXT:   static constexpr bool kModifiesScores = true;
// LOWER:        __device__ static float modify_score(float score, int b, int h, int q_idx, int kv_idx, const Args& args) {
// LOWER-NEXT:     const float v = score * 0.5f;  // softcap.py:9
// LOWER-NEXT:     const float v1 = fast_tanh(v);  // softcap.py:9
// LOWER:      CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_softcap, __nv_bfloat16, 64, 64, SoftcapVariant)
