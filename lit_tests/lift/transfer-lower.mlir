// RUN: cuir-opt --lift --transfer=%examples/specs/causal.py %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>/dev/null | filecheck %s --check-prefix=MASK
// RUN: cuir-opt --lift --transfer=%examples/specs/softcap.py %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>/dev/null | filecheck %s --check-prefix=SCORE
// RUN: cuir-opt --lift --transfer=%examples/specs/causal.py --lower %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>/dev/null | filecheck %s --check-prefix=LOWER
//
// --transfer on the lifted Hopper kernel. The lift masks only where needs_mask(position) holds (an scf.if
// whose then-branch maps -inf past seqlen_k) and folds the softmax scale into the exp2 (scale_log2).

// A mask goes into the mask branch's map, before the bounds test, at the score tile's rows; the branch's
// test becomes the plan's mask-free tiles; the exp2 fold stays.
// MASK:      %full_end = arith.floordivsi
// MASK:      %q_row = arith.addi
// MASK:      cuir.gemm_wait %s_done : !cuir.token<@consumer>
// MASK-NEXT: %[[BEFORE:.*]] = arith.cmpi slt, %kv_lo_1, %{{[0-9]+}} : index
// MASK-NEXT: %[[AFTER:.*]] = arith.cmpi sge, %kv_lo_1, %full_end : index
// MASK-NEXT: %needs_mask = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// MASK-NEXT: %s_1 = scf.if %needs_mask -> (!cuir.tile<64x128xf32, @consumer>) {
// MASK-NEXT:   %s_2 = cuir.map %s at [%q_row, %first_kv_row_1] (%[[X:[^:]+]]: f32, %[[Q:[^:]+]]: index, %[[KV:[^:]+]]: index) {
// MASK-NEXT:     %[[KEEP:.*]] = arith.cmpi sge, %[[Q]], %[[KV]] : index
// MASK-NEXT:     %[[NEG_INF:.*]] = arith.constant 0xff800000 : f32
// MASK-NEXT:     %masked = arith.select %[[KEEP]], %[[X]], %[[NEG_INF]] : f32
// MASK-NEXT:     %[[PAST:.*]] = arith.cmpi sge, %[[KV]], %seqlen_k_1 : index
// MASK:          arith.select %[[PAST]], %{{.*}}, %masked : f32
// MASK:      } else {
// MASK-NEXT:   scf.yield %s : !cuir.tile<64x128xf32, @consumer>
// MASK:      %max = cuir.row_reduce max %s_1
// MASK:      cuir.map %s_1, %{{.*}} (%[[P:[^:]+]]: f32,
// MASK-NEXT:   arith.mulf %[[P]], %scale_log2 : f32

// A score_mod reads the scaled score: a map scales the scores before the mask branch and applies it; the
// exp2 multiplies by log2 e and the LSE takes the row max as it is.
// SCORE:      %log2e = arith.constant 1.44269502 : f32
// SCORE:      cuir.gemm_wait %s_done : !cuir.token<@consumer>
// SCORE-NEXT: %scaled = cuir.map %s at [%c0_1, %first_kv_row_1] (%[[X:[^:]+]]: f32, %{{.*}}: index, %{{.*}}: index) {
// SCORE-NEXT:   %[[SCALED:.*]] = arith.mulf %[[X]], %softmax_scale : f32
// SCORE:        %modified = arith.mulf
// SCORE-NEXT:   cuir.yield %modified : f32
// SCORE:      %s_1 = scf.if %needs_mask -> (!cuir.tile<64x128xf32, @consumer>) {
// SCORE-NEXT:   %s_2 = cuir.map %scaled at
// SCORE:      } else {
// SCORE-NEXT:   scf.yield %scaled : !cuir.tile<64x128xf32, @consumer>
// SCORE:      cuir.map %s_1, %{{.*}} (%[[P:[^:]+]]: f32,
// SCORE-NEXT:   arith.mulf %[[P]], %log2e : f32
// SCORE:      %row_lse = cuir.map %sum_end, %max_end (%[[SUM:[^:]+]]: f32, %[[MAX:[^:]+]]: f32, %{{.*}}: index) {
// SCORE-NOT:    %softmax_scale
// SCORE:        arith.addf %[[MAX]], %{{.*}} : f32
// SCORE-NOT:  scale_log2

// --lower writes the policy from the mask branch: its test's bounds are the kv range's mask-free tiles.
// LOWER:      struct CausalVariant : FullAttention {
// LOWER:        return KvRange{kv_lo, kv_hi, 0, full_end};
// LOWER:        __device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args) {
// LOWER-NEXT:     const bool v = q_idx >= kv_idx;  // causal.py:10
// LOWER:      CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_causal, __nv_bfloat16, 128, 128, CausalVariant)
