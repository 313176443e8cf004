// CuBridge variant seams: what a reference kernel's variant policy works with.
//
// A reference kernel (kernels/attention_sm*.cu) computes everything that attention variants share and asks a
// policy type for the rest: the kv tiles a work tile visits, the kv tile at each position of that sequence,
// score_mod and mask_mod, the normalization and the extra kernel inputs. cuir-opt --lower writes a variant's
// policy from its transferred CuIR (docs/lowering.md); these are the types and helpers that code uses.
#pragma once

#include <stdint.h>

namespace cubridge {

// One work tile: `tile_m` query rows (q_tile) of one query head of one batch entry.
struct WorkTile {
  int q_tile;
  int head;
  int batch;
};

// The kv tiles a work tile visits, as positions [begin, end) of its tile sequence (a position is the kv tile
// itself, or an index into block lists); the positions in [full_begin, full_end) need no mask: every score of
// the tile is kept and every key lies inside the sequence.
struct KvRange {
  int begin;
  int end;
  int full_begin;
  int full_end;

  __device__ __forceinline__ bool needs_mask(int position) const {
    return position < full_begin || position >= full_end;
  }
};

// A captured tensor or block list: row-major with sizes `dims`, read-only for the kernel's lifetime.
template <typename T, int kRank>
struct Table {
  const T* data;
  int dims[kRank];
};

// cuir.gather: table[index...]; an index outside the table reads 0. The load is unconditional (of entry 0 for an
// index outside; the host passes no empty table) and plain, not __ldg: __ldg is inline asm, which the compiler
// neither merges (a mask reads table[q_idx] once per row, not once per score) nor hoists, and a load under a
// bounds test became a branch around it, so that a score tile's loads were issued one after another.
template <typename T, int kRank, typename... Index>
__device__ __forceinline__ T gather(const Table<T, kRank>& table, Index... index) {
  static_assert(sizeof...(Index) == kRank, "gather takes one index per dimension");
  const int indices[kRank] = {static_cast<int>(index)...};
  int flat = 0;
  bool inside = true;
#pragma unroll
  for (int d = 0; d < kRank; ++d) {
    inside &= static_cast<unsigned>(indices[d]) < static_cast<unsigned>(table.dims[d]);
    flat = flat * table.dims[d] + indices[d];
  }
  const T* __restrict__ data = table.data;
  const T value = data[inside ? flat : 0];
  return inside ? value : T(0);
}

// `value` as lane `source` of the warp holds it, word by word (every lane of the warp calls it).
template <typename T>
__device__ __forceinline__ T warp_shuffle(const T& value, int source) {
  static_assert(sizeof(T) % 4 == 0, "a shuffled struct is made of 4-byte fields");
  uint32_t words[sizeof(T) / 4];
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < static_cast<int>(sizeof(T) / 4); ++w) words[w] = __shfl_sync(0xffffffffu, words[w], source);
  T result;
  memcpy(&result, words, sizeof(T));
  return result;
}

// The reference variant: softmax(scale Q K^T) V over every key. A policy's members see the kernel's parameters
// (`Params`: seqlen_q, seqlen_k, ...) and the Args of the policy that calls them, so a variant that adds inputs
// keeps the members it does not override.
struct FullAttention {
  // Kernel inputs beyond the kernel's parameters (captured tensors, block lists), passed by value.
  struct Args {};
  // Whether the variant has a score_mod, `static float modify_score(float score, int b, int h, int q_idx,
  // int kv_idx, const Args&)` of a scaled score; then the exp2 FFMA no longer folds the scale.
  static constexpr bool kModifiesScores = false;
  // Whether modify_score is score + slope * (q_idx - kv_idx), with `static float position_slope(int b, int h,
  // const Args&)`: the Hopper kernel then evaluates it reassociated, the index difference split into a part per
  // row and a constant per fragment column, where a conversion and two FP32 operations per score were.
  static constexpr bool kPositionBias = false;
  // Whether the Hopper consumer runs its kv steps as a masked, a mask-free and a masked loop (the positions before
  // full_begin, those up to full_end, the rest) instead of one loop that tests needs_mask(position) per step: the
  // same steps in the same order, each loop compiled for its case. Set for block lists (partial tiles first).
  static constexpr bool kUnswitchedMask = false;
  // Whether the Hopper producer claims past the work tiles whose kv range is empty (end == begin: their rows keep
  // no key), so that no role visits them, and writes their rows itself as such a tile ends (O = 0, LSE = -inf).
  // Needs the dynamic schedule (the producer hands every tile to the consumers). Set for block lists.
  static constexpr bool kSkipsEmptyTiles = false;
  // Whether the Hopper tile scheduler visits the work tiles in the order the host passes (p.tile_order, when not
  // null): which CTA runs a tile, never what it computes. Set for block lists, whose host orders the tiles of each
  // chunk of heads by the kv tiles they visit, longest first, and the schedule's last waves longest first.
  static constexpr bool kHostTileOrder = false;
  // Softmax normalization; false: P = activate(score), `static float activate(float score)`, with no row max,
  // rescaling or division by row sums.
  static constexpr bool kSoftmax = true;
  // Whether keep() loads from tables (captured tensors): the Hopper kernel then evaluates a masked tile's keep()
  // while the tile's score GEMM runs, so that the loads' latency hides under it.
  static constexpr bool kMaskLoads = false;
  // Whether keep() takes the values it loads for the key alone as `const Columns&` (from `static Columns
  // columns(int b, int h, int kv_idx, const Args&)`): the Hopper kernel then evaluates them once per key of a
  // tile, each lane for a few keys, and shuffles them to the scores that need them.
  static constexpr bool kMaskColumns = false;
  struct Columns {};
  // Whether a masked tile's keep() results come as bits the runtime computed from the mask (Args::mask_bits, a
  // Table<uint32_t, 5>: kernel_inputs.visit_order_bits, by position of the work tile's kv sequence), which the
  // Hopper kernel loads a step ahead instead of evaluating keep(): set for block lists (masks the symbolic analysis
  // cannot bound, whose keep() is costly per score; their masked positions are the partial tiles, listed first).
  // keep() stays the definition (the lift reads the flag as false; the Ampere kernel evaluates it).
  static constexpr bool kMaskBits = false;
  // Whether the Hopper consumer retires a step's P V at the top of the next step (after its mbarrier waits, then
  // O rescaled and P packed) instead of inside the next softmax, after some of its exps: for a
  // modify_score that puts special functions on the MUFU before the softmax (tanh), whose MUFU stream the
  // softmax's wait would split (run 157: -1.8% to -3% for tanh softcap). Both orders sum the same terms; O's
  // rescale is associated differently (fp32 rounding). The lift reads the flag as false.
  static constexpr bool kRetireAtStepTop = false;
  // Whether two CTAs of a cluster share their K and V loads (the Hopper kernel's K/V pairs: each producer
  // multicasts half of every kv tile into both). The reference's full-mask pair entry points set it, and so do a
  // lowered variant's where the work tiles of a head visit the same kv tiles (its `<Variant>InPairs` policy); the
  // host launches them where a head's query tiles are even in number. The lift reads the flag as false: each CTA
  // loading its own tiles defines it (both receive the same bytes).
  static constexpr bool kSharesKvInPair = false;

  // The kv tiles that rows [q_first, q_last] of `tile` visit, in every role. A kernel that peels the first
  // position needs end > begin, unless kSkipsEmptyTiles keeps every role off the tiles where end == begin.
  template <int kBlockN, typename Params, typename VariantArgs>
  __device__ static KvRange kv_range(const Params& p, const VariantArgs&, const WorkTile&, int, int) {
    return KvRange{0, (p.seqlen_k + kBlockN - 1) / kBlockN, 0, p.seqlen_k / kBlockN};
  }
  // The kv tile at `position` of the work tile's sequence.
  template <typename Params, typename VariantArgs>
  __device__ static int kv_tile(const Params&, const VariantArgs&, const WorkTile&, int position) {
    return position;
  }
  // mask_mod(b, h, q_idx, kv_idx): whether the score is kept.
  template <typename VariantArgs>
  __device__ static bool keep(int, int, int, int, const VariantArgs&) {
    return true;
  }
};

// Causal, top-left aligned: query i sees keys j <= i.
struct CausalAttention : FullAttention {
  template <int kBlockN, typename Params, typename VariantArgs>
  __device__ static KvRange kv_range(const Params& p, const VariantArgs&, const WorkTile&, int q_first, int q_last) {
    const int kv_end = min(p.seqlen_k, q_last + 1);
    return KvRange{0, (kv_end + kBlockN - 1) / kBlockN, 0, min(p.seqlen_k, q_first + 1) / kBlockN};
  }
  template <typename VariantArgs>
  __device__ static bool keep(int, int, int q_idx, int kv_idx, const VariantArgs&) {
    return kv_idx <= q_idx;
  }
};

// arith.floordivsi: the quotient rounded toward negative infinity (Python's and torch's //).
__device__ __forceinline__ int floor_div(int a, int b) {
  const int quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

// arith.ceildivsi: the quotient rounded toward positive infinity.
__device__ __forceinline__ int ceil_div(int a, int b) {
  const int quotient = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? quotient + 1 : quotient;
}

}  // namespace cubridge
