// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py --lower %examples/ir/attention_sm90.mlir | filecheck %s
// RUN: cuir-opt --transfer=%examples/specs/sigmoid.py --lower %examples/ir/attention_sm80.mlir | filecheck %s

// Sigmoid normalization: kSoftmax = false and activate() from the probability map; the score_mod (the
// bias) stays a score_mod.

// CHECK:      struct SigmoidVariant : FullAttention {
// CHECK-NEXT:   static constexpr bool kModifiesScores = true;
// CHECK-NEXT:   static constexpr bool kSoftmax = false;
// CHECK:        __device__ static float modify_score(
// CHECK-NEXT:     const float modified = score + -5.545177{{[0-9]*}}f;  // sigmoid.py:{{[0-9]+}}
// CHECK:        __device__ static float activate(float score) {
// CHECK:          return v{{[0-9]*}};
