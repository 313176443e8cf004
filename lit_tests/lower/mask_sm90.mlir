// RUN: cuir-opt --transfer=%examples/specs/causal.py --lower %examples/ir/attention_sm90.mlir | filecheck %s

// A mask: the policy derives from the reference's FullAttention and overrides the kv range (closed-form
// bounds from the mask analysis; the mask-free tiles are [0, full_end), the first tile included, as in the
// hand-written CausalAttention) and keep (mask_mod), each statement
// naming the spec line it came from; the instances replace the reference's. Causal masks only its last kv tiles:
// the consumer keeps its one loop with the per-step mask test (no kUnswitchedMask, which only block lists gain by).

// CHECK:      // [variant policy] cuir-opt --lower inserts a transferred variant's policy after this line.
// CHECK:      struct CausalVariant : FullAttention {
// CHECK-NOT:    struct Args
// CHECK-NOT:    kModifiesScores
// CHECK-NOT:    kUnswitchedMask
// CHECK:        template <int kBlockN, typename VariantArgs>
// CHECK-NEXT:   __device__ static KvRange kv_range(const AttentionParams& p, const VariantArgs& args, const WorkTile& tile, int, int) {
// CHECK-NEXT:     static_assert(kBlockN == 128, "the transferred CuIR has 128-key kv tiles");
// CHECK:          const int q_first = tile.q_tile * 128;  // causal.py:{{[0-9]+}}
// CHECK:          const int full_end = floor_div(v{{[0-9]+}}, 128);  // causal.py:{{[0-9]+}}
// CHECK:          return KvRange{kv_lo, kv_hi, 0, full_end};
// CHECK:        __device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args) {
// CHECK-NEXT:     const bool v = q_idx >= kv_idx;  // causal.py:{{[0-9]+}}
// CHECK-NEXT:     return v;
// CHECK:      };
// CHECK:      // [entry points] cuir-opt --lower replaces the instances below with the variant's.
// The program's 128-key kv tile serves D = 128 only (D = 64 takes 192-key tiles, D = 256 80-key ones: their own
// lifts).
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_causal, __nv_bfloat16, 128, 128, CausalVariant)
// CHECK-NEXT: CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_causal, __half, 128, 128, CausalVariant)
// CHECK-NOT:  CUBRIDGE_ATTENTION_SM90_ENTRY
