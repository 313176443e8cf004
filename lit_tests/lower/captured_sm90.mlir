// RUN: cuir-opt --transfer=%examples/specs/alibi.py --lower %examples/ir/attention_sm90.mlir | filecheck %s

// A captured tensor: a kernel input in the policy's Args, read with a bounds-checked __ldg gather.

// CHECK:      struct AlibiVariant : FullAttention {
// CHECK-NEXT:   struct Args {
// CHECK-NEXT:     Table<float, 1> alibi_slopes;
// CHECK-NEXT:   };
// CHECK:        __device__ static float modify_score(
// CHECK-NEXT:     const float v = gather(args.alibi_slopes, h);  // alibi.py:{{[0-9]+}}
