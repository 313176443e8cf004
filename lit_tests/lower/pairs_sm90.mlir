// RUN: cuir-opt --transfer=%examples/specs/softcap.py --lower %examples/ir/attention_sm90.mlir | filecheck %s
// RUN: cuir-opt --transfer=%examples/specs/causal.py --lower %examples/ir/attention_sm90.mlir | filecheck %s --check-prefix=CAUSAL
// RUN: cuir-opt --transfer=%examples/specs/softcap.py --lower %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix=SM80

// K/V pairs: a variant whose work tiles of a head all visit the same kv tiles (no block lists, a kv range that does
// not read the query rows) gets the reference's pair entry points too, with its policy and kSharesKvInPair set; the
// host launches them where the reference would launch its own. A mask whose kv range reads the query rows (causal)
// gets none, nor does the Ampere reference, which has no pairs.

// CHECK:      struct SoftcapVariant : FullAttention {
// CHECK:      struct SoftcapVariantInPairs : SoftcapVariant {
// CHECK-NEXT:   static constexpr bool kSharesKvInPair = true;
// CHECK-NEXT: };
// CHECK:      // [entry points] cuir-opt --lower replaces the instances below with the variant's.
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_softcap, __nv_bfloat16, 128, 128, SoftcapVariant)
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_softcap, __half, 128, 128, SoftcapVariant)
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_bf16_d128_softcap_pairs, __nv_bfloat16, 128, 128, SoftcapVariantInPairs)
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_fp16_d128_softcap_pairs, __half, 128, 128, SoftcapVariantInPairs)
// CHECK-NOT:  ENTRY(

// CAUSAL-NOT: CausalVariantInPairs
// CAUSAL:     CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_causal, __half, 128, 128, CausalVariant)
// CAUSAL-NOT: ENTRY(

// SM80:       struct SoftcapVariant : FullAttention {
// SM80-NOT:   SoftcapVariantInPairs
// SM80:       CUBRIDGE_ATTENTION_ENTRY(attention_sm80_fp16_d128_softcap, __half, 128, 64, SoftcapVariant)
// SM80-NOT:   ENTRY(
