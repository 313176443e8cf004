// FlashAttention-2 style forward attention for Ampere-class GPUs (runs on sm_80 and newer).
//
//   O[b, h, i, :] = sum_j softmax_j(scale * Q[b, h, i, :] . K[b, h / group, j, :]) V[b, h / group, j, :]
//
// Layout: Q, K, V, O are [B, H, S, D] with any strides except a contiguous last dim (D). GQA: query head
// h reads key/value head h / (HQ / HKV). Causal masking is top-left aligned (torch SDPA is_causal,
// FlexAttention): query i attends to key j iff j <= i, whatever SQ and SKV are. Optional LSE output:
// natural-log log-sum-exp of the scaled scores, fp32 [B, HQ, SQ] contiguous.
//
// Work split: one CTA of 4 warps per (kBlockM query rows, head, batch); each warp owns kBlockM / 4 rows.
// Q stays in shared memory and is re-read per k-slice; K/V tiles are double buffered with cp.async, so the
// copy of block j + 1 overlaps the math of block j. Softmax is online (running max and sum), in base 2.
// Written only with the primitives of cubridge/*.cuh plus plain control flow.
#include "cubridge/ampere.cuh"
#include "cubridge/math.cuh"
#include "cubridge/sync.cuh"
#include "cubridge/variant.cuh"

namespace {

using namespace cubridge;

// Kernel arguments, passed by value; mirrored by ctypes in cubridge/runtime/attention.py.
struct AttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // nullptr: LSE not written
  int64_t q_stride_b, q_stride_h, q_stride_s;
  int64_t k_stride_b, k_stride_h, k_stride_s;
  int64_t v_stride_b, v_stride_h, v_stride_s;
  int64_t o_stride_b, o_stride_h, o_stride_s;
  int seqlen_q;
  int seqlen_k;
  int num_heads_q;
  int num_heads_kv;
  float scale;       // softmax scale applied to Q . K
  float scale_log2;  // scale * log2(e)
};

constexpr int kBlockM = 128;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 2;
constexpr int kRowsPerWarp = kBlockM / kWarps;
constexpr int kMTiles = kRowsPerWarp / 16;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLowestFloat = -3.40282347e+38f;  // -FLT_MAX
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim, int kBlockN>
constexpr int shared_bytes() {
  return (kBlockM + 2 * kStages * kBlockN) * kHeadDim * 2;
}

// ---------------------------------------------------------------------------------------------------------
// Variant policies (cubridge/variant.cuh): everything an instance computes beyond softmax(scale Q K^T) V goes
// through a policy's members, and nothing else in this file differs between variants. examples/ir/attention_sm80.mlir
// mirrors the FullAttention instance; cuir-opt --lower writes a transferred variant as a policy derived from
// FullAttention that overrides the members whose CuIR changed (docs/lowering.md).

// [variant policy] cuir-opt --lower inserts a transferred variant's policy after this line.

// Whether scores are scaled before the policy sees them (a score_mod, or an activation of the scaled score);
// otherwise the softmax folds the scale into its exp2 FFMA and keeps the row max over unscaled scores.
template <typename Policy>
constexpr bool kScoresScaled = Policy::kModifiesScores || !Policy::kSoftmax;

// Running softmax state of the rows this thread holds: [m-tile][0: row g, 1: row g + 8].
struct SoftmaxState {
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];  // this thread's partial sums; the quad reduces them in the epilogue
};

// S = Q K^T for one K block: the warp's kRowsPerWarp x kBlockN scores, fp32, in mma accumulator layout.
template <typename T, int kHeadDim, int kBlockN>
__device__ __forceinline__ void compute_scores(float (&scores)[kMTiles][kBlockN / 8][4], const T* q_tile,
                                               const T* k_tile, int warp, int lane) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) scores[mt][nt][e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    uint32_t q_frag[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      load_a_fragment<kHeadDim>(q_frag[mt], q_tile, warp * kRowsPerWarp + mt * 16, ks * 16, lane);
#pragma unroll
    for (int np = 0; np < kBlockN / 16; ++np) {
      uint32_t k_frag[4];
      load_b_fragments<kHeadDim>(k_frag, k_tile, np * 16, ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma_16816<T>(scores[mt][2 * np], q_frag[mt], k_frag[0], k_frag[1]);
        mma_16816<T>(scores[mt][2 * np + 1], q_frag[mt], k_frag[2], k_frag[3]);
      }
    }
  }
}

// The variant's scores of one kv tile starting at key n0, for this warp's rows from first_row: modify_score on
// every tile (after the scale, when kScoresScaled), then, only where `masked`, -inf for the keys past seqlen_k
// and those mask_mod drops.
template <typename Policy, int kBlockN>
__device__ __forceinline__ void score_tile(float (&scores)[kMTiles][kBlockN / 8][4], const AttentionParams& p,
                                           const typename Policy::Args& args, const WorkTile& tile, int first_row,
                                           int n0, bool masked, int lane) {
  auto row_of = [&](int mt, int e) { return first_row + mt * 16 + (lane >> 2) + (e >> 1) * 8; };
  auto col_of = [&](int nt, int e) { return n0 + nt * 8 + (lane & 3) * 2 + (e & 1); };
  if constexpr (kScoresScaled<Policy>) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float& score = scores[mt][nt][e];
          if constexpr (Policy::kModifiesScores)
            score = Policy::modify_score(score * p.scale, tile.batch, tile.head, row_of(mt, e), col_of(nt, e), args);
          else
            score *= p.scale;
        }
  }
  if (!masked) return;
  // keep() runs for every score, past seqlen_k too: not under the bounds test, so that the table loads of a
  // data-dependent mask are all issued together rather than each behind its own branch.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = col_of(nt, e);
        const bool kept = Policy::keep(tile.batch, tile.head, row_of(mt, e), col, args);
        if (col >= p.seqlen_k || !kept) scores[mt][nt][e] = kNegInf;
      }
}

// Online softmax step: raises the running max with this block's scores, rescales the running sum and
// the output accumulator by exp2((old max - new max) * scale_log2), and turns scores into probabilities.
template <int kHeadDim, int kBlockN>
__device__ __forceinline__ void softmax_update(float (&scores)[kMTiles][kBlockN / 8][4],
                                               float (&out)[kMTiles][kHeadDim / 8][4], SoftmaxState& state,
                                               float scale_log2) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float block_max = kNegInf;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
        block_max = fmaxf(block_max, fmaxf(scores[mt][nt][2 * half], scores[mt][nt][2 * half + 1]));
      block_max = row_reduce_max(block_max);
      const float new_max = fmaxf(state.row_max[mt][half], block_max);
      // The exp2 offset, floored: finite for a row with no visible key so far (max -inf) and for one whose every
      // score vanishes in base 2 (max * scale_log2 overflows, as torch.finfo(float32).min does), so exp2 sees no
      // NaN and such a row sums to 0: output 0, LSE -inf, as FlexAttention's kernels give.
      const float max_scaled = fmaxf(new_max * scale_log2, kLowestFloat);
      const float correction = fast_exp2(state.row_max[mt][half] * scale_log2 - max_scaled);
      state.row_max[mt][half] = new_max;
      float sum = state.row_sum[mt][half] * correction;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        out[mt][dt][2 * half] *= correction;
        out[mt][dt][2 * half + 1] *= correction;
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          scores[mt][nt][e] = fast_exp2(fmaf(scores[mt][nt][e], scale_log2, -max_scaled));
          sum += scores[mt][nt][e];
        }
      state.row_sum[mt][half] = sum;
    }
}

// The normalization of one score block: the online softmax, or P = activate(score) with nothing to rescale.
template <typename Policy, int kHeadDim, int kBlockN>
__device__ __forceinline__ void normalize_scores(float (&scores)[kMTiles][kBlockN / 8][4],
                                                 float (&out)[kMTiles][kHeadDim / 8][4], SoftmaxState& state,
                                                 const AttentionParams& p) {
  if constexpr (Policy::kSoftmax) {
    softmax_update<kHeadDim, kBlockN>(scores, out, state, kScoresScaled<Policy> ? kLog2e : p.scale_log2);
  } else {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) scores[mt][nt][e] = Policy::activate(scores[mt][nt][e]);
  }
}

// O += P V for one V block. P comes straight from the score accumulators: the m16n8 accumulators of
// n-tiles 2k and 2k + 1, packed to 16 bits, are exactly the m16n8k16 A fragment of k-slice k.
template <typename T, int kHeadDim, int kBlockN>
__device__ __forceinline__ void accumulate_pv(float (&out)[kMTiles][kHeadDim / 8][4],
                                              const float (&probs)[kMTiles][kBlockN / 8][4], const T* v_tile,
                                              int lane) {
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    uint32_t p_frag[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      p_frag[mt][0] = convert_pack<T>(probs[mt][2 * ks][0], probs[mt][2 * ks][1]);
      p_frag[mt][1] = convert_pack<T>(probs[mt][2 * ks][2], probs[mt][2 * ks][3]);
      p_frag[mt][2] = convert_pack<T>(probs[mt][2 * ks + 1][0], probs[mt][2 * ks + 1][1]);
      p_frag[mt][3] = convert_pack<T>(probs[mt][2 * ks + 1][2], probs[mt][2 * ks + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t v_frag[4];
      load_b_fragments_trans<kHeadDim>(v_frag, v_tile, ks * 16, dp * 16, lane);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma_16816<T>(out[mt][2 * dp], p_frag[mt], v_frag[0], v_frag[1]);
        mma_16816<T>(out[mt][2 * dp + 1], p_frag[mt], v_frag[2], v_frag[3]);
      }
    }
  }
}

// Epilogue: divides by the row sums, writes LSE, stages O through shared memory (the Q tile, free after
// the mainloop's last barrier) and stores it to global with 16-byte writes.
template <typename T, int kHeadDim, typename Policy>
__device__ __forceinline__ void write_output(float (&out)[kMTiles][kHeadDim / 8][4], const SoftmaxState& state,
                                             const AttentionParams& p, T* o, float* lse_row0, int m0,
                                             T* staging_tile, int warp, int lane) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // An activation's P needs no division by row sums and has no LSE.
      const float sum = Policy::kSoftmax ? row_reduce_sum(state.row_sum[mt][half]) : 1.f;
      const float inverse = sum > 0.f ? 1.f / sum : 0.f;
      const int row = warp * kRowsPerWarp + mt * 16 + (lane >> 2) + half * 8;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        const uint32_t packed =
            convert_pack<T>(out[mt][dt][2 * half] * inverse, out[mt][dt][2 * half + 1] * inverse);
        store_pair_shared<kHeadDim>(staging_tile, row, dt * 8 + (lane & 3) * 2, packed);
      }
      if (Policy::kSoftmax && lse_row0 != nullptr && (lane & 3) == 0 && m0 + row < p.seqlen_q)
        lse_row0[row] = state.row_max[mt][half] * (kScoresScaled<Policy> ? 1.f : p.scale) + logf(sum);
    }
  barrier();
  store_tile_global<kBlockM, kHeadDim, kThreads>(o, p.o_stride_s, p.seqlen_q - m0, staging_tile,
                                                  threadIdx.x);
}

template <typename T, int kHeadDim, int kBlockN, typename Policy>
__device__ __forceinline__ void attention_forward(const AttentionParams& p, const typename Policy::Args& args) {
  extern __shared__ __align__(128) unsigned char shared_raw[];
  T* q_tile = reinterpret_cast<T*>(shared_raw);
  T* k_tiles = q_tile + kBlockM * kHeadDim;
  T* v_tiles = k_tiles + kStages * kBlockN * kHeadDim;
  constexpr int kKvTileElems = kBlockN * kHeadDim;

  const int thread = threadIdx.x;
  const int warp = thread / 32;
  const int lane = thread % 32;
  // Heaviest (causal) query blocks first, so the tail of the grid holds the short ones.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const WorkTile tile{static_cast<int>(gridDim.x - 1 - blockIdx.x), head, batch};
  const int kv_head = head / (p.num_heads_q / p.num_heads_kv);

  const T* q = static_cast<const T*>(p.q) + batch * p.q_stride_b + head * p.q_stride_h + m0 * p.q_stride_s;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_stride_b + kv_head * p.k_stride_h;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_stride_b + kv_head * p.v_stride_h;
  T* o = static_cast<T*>(p.o) + batch * p.o_stride_b + head * p.o_stride_h + m0 * p.o_stride_s;
  float* lse_row0 =
      p.lse == nullptr ? nullptr : p.lse + (int64_t(batch) * p.num_heads_q + head) * p.seqlen_q + m0;

  const KvRange range = Policy::template kv_range<kBlockN>(p, args, tile, m0, min(m0 + kBlockM, p.seqlen_q) - 1);
  // First key of the kv tile at `position` of the tile sequence.
  auto kv_row = [&](int position) { return Policy::kv_tile(p, args, tile, position) * kBlockN; };

  // Prologue: group 0 = Q + the first K block, group 1 = the first V block.
  const int first_n0 = kv_row(range.begin);
  load_tile_async<kBlockM, kHeadDim, kThreads>(q_tile, q, p.q_stride_s, p.seqlen_q - m0, thread);
  load_tile_async<kBlockN, kHeadDim, kThreads>(k_tiles, k + first_n0 * p.k_stride_s, p.k_stride_s,
                                               p.seqlen_k - first_n0, thread);
  commit_group();
  load_tile_async<kBlockN, kHeadDim, kThreads>(v_tiles, v + first_n0 * p.v_stride_s, p.v_stride_s,
                                               p.seqlen_k - first_n0, thread);
  commit_group();

  float out[kMTiles][kHeadDim / 8][4];
  SoftmaxState state;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[mt][dt][e] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      state.row_max[mt][half] = kNegInf;
      state.row_sum[mt][half] = 0.f;
    }
  }

  // Mainloop over K/V blocks. Per iteration: issue block j + 1's copies into the other stage (two groups,
  // empty past the end), wait for K_j, compute S, wait for V_j, accumulate P V, then free stage j.
  for (int j = range.begin; j < range.end; ++j) {
    const int n0 = kv_row(j);
    const int stage = (j - range.begin) % kStages;
    const T* k_tile = k_tiles + stage * kKvTileElems;
    const T* v_tile = v_tiles + stage * kKvTileElems;
    const bool has_next = j + 1 < range.end;
    const int next_n0 = kv_row(j + 1);
    T* next_k_tile = k_tiles + (stage ^ 1) * kKvTileElems;
    T* next_v_tile = v_tiles + (stage ^ 1) * kKvTileElems;
    if (has_next)
      load_tile_async<kBlockN, kHeadDim, kThreads>(next_k_tile, k + next_n0 * p.k_stride_s, p.k_stride_s,
                                                   p.seqlen_k - next_n0, thread);
    commit_group();
    if (has_next)
      load_tile_async<kBlockN, kHeadDim, kThreads>(next_v_tile, v + next_n0 * p.v_stride_s, p.v_stride_s,
                                                   p.seqlen_k - next_n0, thread);
    commit_group();

    wait_group<3>();  // K_j (and Q) landed; V_j, K_j+1, V_j+1 may be in flight
    barrier();
    float scores[kMTiles][kBlockN / 8][4];
    compute_scores<T, kHeadDim, kBlockN>(scores, q_tile, k_tile, warp, lane);
    score_tile<Policy, kBlockN>(scores, p, args, tile, m0 + warp * kRowsPerWarp, n0, range.needs_mask(j), lane);
    normalize_scores<Policy, kHeadDim, kBlockN>(scores, out, state, p);

    wait_group<2>();  // V_j landed
    barrier();
    accumulate_pv<T, kHeadDim, kBlockN>(out, scores, v_tile, lane);
    barrier();  // every warp is done reading this stage before iteration j + 1 refills it
  }
  // The .mlir's wait for the last prefetch: a work tile that visits no kv tile (a mask that keeps none of its
  // keys) leaves the prologue's copies in flight, and O is staged in Q's buffer.
  wait_group<0>();
  barrier();

  write_output<T, kHeadDim, Policy>(out, state, p, o, lse_row0, m0, q_tile, warp, lane);
}

}  // namespace

// Entry points: attention_sm80_<dtype>_d<head dim>_<variant>; dynamic shared memory is
// (kBlockM + 2 * kStages * kBlockN) * D * 2 bytes, launch with kThreads threads per CTA and grid
// (ceil(SQ / kBlockM), HQ, B). `args` is the policy's Args (one unused byte when empty).
#define CUBRIDGE_ATTENTION_ENTRY(name, T, head_dim, block_n, Policy)                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 2) name(const AttentionParams p, const Policy::Args args) { \
    attention_forward<T, head_dim, block_n, Policy>(p, args);                                                  \
  }

// [entry points] cuir-opt --lower replaces the instances below with the variant's.
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_full, __nv_bfloat16, 64, 64, FullAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_causal, __nv_bfloat16, 64, 64, CausalAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d128_full, __nv_bfloat16, 128, 64, FullAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d128_causal, __nv_bfloat16, 128, 64, CausalAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_fp16_d64_full, __half, 64, 64, FullAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_fp16_d64_causal, __half, 64, 64, CausalAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_fp16_d128_full, __half, 128, 64, FullAttention)
CUBRIDGE_ATTENTION_ENTRY(attention_sm80_fp16_d128_causal, __half, 128, 64, CausalAttention)
