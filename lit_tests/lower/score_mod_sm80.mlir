// RUN: cuir-opt --transfer=%examples/specs/softcap.py --lower %examples/ir/attention_sm80.mlir | filecheck %s

// A score_mod: modify_score gets CAP * tanh(score / CAP) with tanh.approx and the division by the constant
// as a multiplication; kModifiesScores moves the scale out of the exp2 FFMA.

// CHECK:      struct SoftcapVariant : FullAttention {
// CHECK-NEXT:   static constexpr bool kModifiesScores = true;
// CHECK:        __device__ static float modify_score(float score, int b, int h, int q_idx, int kv_idx, const Args& args) {
// CHECK-NEXT:     const float v = score * 0.5f;  // softcap.py:9
// CHECK-NEXT:     const float v1 = fast_tanh(v);  // softcap.py:9
// CHECK-NEXT:     const float modified = v1 * 2.0f;  // softcap.py:9
// CHECK-NEXT:     return modified;
// CHECK-NEXT:   }
// CHECK-NEXT: };
// CHECK:      CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_softcap, __nv_bfloat16, 64, 64, SoftcapVariant)
