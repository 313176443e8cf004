// RUN: cuir-opt --transfer=%examples/specs/prefix_lm.py --emit-diff %examples/ir/attention_sm90.mlir | filecheck %s
// RUN: cuir-opt --lower %examples/ir/attention_sm90.mlir | diff - %examples/../cubridge/runtime/kernels/attention_sm90.cu
// RUN: cuir-opt --emit-diff %examples/ir/attention_sm80.mlir -o %t && test ! -s %t

// The patch: the policy after the variant-policy line, the instances after the entry-point line, nothing
// else; the untransformed program patches nothing.

// CHECK:      --- a/cubridge/runtime/kernels/attention_sm90.cu
// CHECK-NEXT: +++ b/cubridge/runtime/kernels/attention_sm90.cu
// CHECK-NEXT: @@
// CHECK:       // [variant policy] cuir-opt --lower inserts a transferred variant's policy after this line.
// CHECK:      +struct PrefixLmVariant : FullAttention {
// CHECK:      @@
// CHECK:       // [entry points] cuir-opt --lower replaces the instances below with the variant's.
// CHECK-NEXT: -CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_full, __nv_bfloat16, 128, 128, FullAttention)
// CHECK:      +CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_prefix_lm, __half, 128, 128, PrefixLmVariant)
// CHECK-NOT:  @@
