// FlashAttention-3 style forward attention for Hopper (sm_90a only: wgmma, setmaxnreg, TMA).
//
//   O[b, h, i, :] = sum_j softmax_j(scale * Q[b, h, i, :] . K[b, h / group, j, :]) V[b, h / group, j, :]
//
// Layout: Q, K, V, O are [B, H, S, D] read and written through 4-D TMA tensor maps (built on the host with
// 128-byte swizzle, box inner extent 64 elements), so any strides with a contiguous last dim work and rows
// past SQ / SKV read as zero and are never written. GQA: query head h reads key/value head h / (HQ / HKV).
// Causal masking is top-left aligned, as in attention_sm80.cu: query i attends to key j iff j <= i. LSE
// (optional): natural-log log-sum-exp of the scaled scores, fp32 [B, HQ, SQ] contiguous.
//
// The program is examples/ir/attention_sm90.mlir; the file is organised like FlashAttention-3:
//   * tile scheduler: a persistent grid (one CTA per SM) walks 128-row query tiles (q_tile, head, batch),
//     heads grouped in chunks (p.head_chunk) so that CTAs running together share K/V in L2, and inside a
//     chunk the longest causal tiles first. Full masks: a static stride. Causal: CTAs claim tiles from a
//     global counter, and the producer warp hands each index to the consumers through shared memory (a
//     block-list variant's producer claims past the tiles whose lists are empty and writes their rows itself);
//   * pipeline: mbarrier pairs (full: TMA bytes landed; empty: every consumer warp is done reading) for a
//     single Q buffer and kStages K and V buffers;
//   * producer warp group (24 registers): one warp walks the schedule, its lane 0 issues the TMA loads;
//   * consumer warp groups 1 and 2 (240 registers): each owns 64 query rows of the tile. Per kv tile j it
//     issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} as async wgmma, then runs the online softmax of S_j
//     while P V runs (intra-warpgroup overlap). The two groups take turns issuing GEMMs through named
//     barriers 1 and 2 (ping-pong), so one group's softmax overlaps the other's GEMMs;
//   * epilogue: normalise, pack to 16 bits, stage through swizzled shared memory, TMA store; LSE by row.
// Head dims 64, 128 and 256. D = 256 takes 80-key kv tiles (O alone is 128 registers a thread) and stages O
// in the group's own Q half, so Q is released after the epilogue's store has read it rather than after the
// last Q K^T. D = 128 full masks have entry points with 160-key kv tiles as well, for long key sequences.
// The .mlir shows every wait, release, GEMM turn and async op of this file in this order (it is the bf16
// D = 128 full-mask instance; causal masking, tile bounds and the dynamic schedule come from cuir-opt
// --transfer). Lowering
// conventions it leaves to the CUDA side (docs/architecture.md): a consumer's mbarrier arrival is one per
// warp (counts x4); the producer is one warp whose lane 0 issues; the score scale is folded into the exp2
// FFMA (max over raw scores: the same function for scale > 0); row sums stay per thread until the epilogue;
// bounds and causal masks run only on the kv tiles that need them; the dynamic schedule's claim and hand-off
// (tile slot, named barriers 5-8) are cuir.for_each_tile's lowering; heads are visited in chunks sized to
// L2; the empty store group before the first tile is a bulk-store commit.
// Written only with the primitives of cubridge/*.cuh plus plain control flow.
#include "cubridge/hopper.cuh"
#include "cubridge/math.cuh"
#include "cubridge/sync.cuh"
#include "cubridge/variant.cuh"

namespace {

using namespace cubridge;

// Kernel arguments besides the tensor maps; mirrored by ctypes in cubridge/runtime/attention_sm90.py.
struct AttentionParams {
  float* lse;           // nullptr: LSE not written
  void* out;            // O [B, HQ, SQ, D] contiguous (the tensor o_map describes): rows of skipped empty tiles
  int* tile_counter;    // nullptr: static schedule; else a zeroed counter for the dynamic schedule
  const int* tile_order;  // nullptr: decode's order; else the tile at each position (block lists: longest first)
  int batch;
  int num_heads_q;
  int num_heads_kv;
  int seqlen_q;
  int seqlen_k;
  int head_chunk;    // (head, batch) pairs the tile scheduler walks together (>= 1)
  float scale;       // softmax scale applied to Q . K
  float scale_log2;  // scale * log2(e)
};

constexpr int kBlockM = 128;                 // query rows per tile
constexpr int kConsumerRows = 64;            // query rows per consumer warp group
constexpr int kConsumerGroups = kBlockM / kConsumerRows;
constexpr int kStages = 2;                   // K and V buffers
constexpr int kWarpGroupThreads = 128;
constexpr int kThreads = kWarpGroupThreads * (1 + kConsumerGroups);
constexpr int kConsumerWarps = kConsumerGroups * 4;
constexpr int kProducerRegisters = 24;
constexpr int kConsumerRegisters = 240;
// setmaxnreg.inc draws only on the registers this CTA's own warps gave back with setmaxnreg.dec: the role
// budgets must fit in what the CTA holds from launch (the __launch_bounds__ cap, 168 per thread at 384
// threads), not merely in the 64K register file, or the consumers wait forever (run 36 hung with 32 / 240).
constexpr int kLaunchRegisters = 65536 / kThreads / 8 * 8;
static_assert(kProducerRegisters * kWarpGroupThreads + kConsumerRegisters * kConsumerGroups * kWarpGroupThreads <=
                  kLaunchRegisters * kThreads,
              "warp-group register budgets exceed the CTA's launch allocation");
constexpr int kPanelCols = 64;               // 128-byte swizzle panels of 16-bit elements
// Keys per kv tile (kBlockKv): each entry point names its own (see the entry points at the end of the file).
template <int kBlockKv>
constexpr int kScoreRegs = kBlockKv / 2;  // fp32 scores per thread (64 x kBlockKv over 128 threads)
template <int kBlockKv>
constexpr int kProbRegs = kBlockKv / 4;   // packed 16-bit probabilities per thread
// One softmax exp2 in every kFmaExp2Period on the FMA pipe (fma_exp2), the others on the MUFU; 0: all on the MUFU.
// D = 64: the MUFU is a kv step's busiest unit (96 exp2 a thread, 8 cycles a warp each: 1568 cycles a step per SM
// sub-partition against 1536 of tensor-core work); one in twelve gains 3.0-3.7%, 6, 8, 16 or 24 less (runs 123-124;
// none: -6.8%, run 179). D = 128: none; one in 32 gained 0.6-1.2% before P V retired inside the softmax (run 139)
// and costs 1.8-2.6% since (runs 178-180), its FMA work also costing work per joule at the power cap.
// D = 256: one in 32 (0.2-1.4%, runs 140 and 143; none is level, run 179), but not beside a mask's table loads or
// loaded bits (-0.6-1%, run 147).
template <int kHeadDim, typename Policy>
constexpr int kFmaExp2Period =
    kHeadDim == 64 ? 12 : kHeadDim == 128 || Policy::kMaskLoads || Policy::kMaskBits ? 0 : 32;
// P V retires inside the softmax after this many of a thread's exp2s (gemm_wait_after; runs 161-163, against half
// a step's): D = 128 after 36 of 64 (+1.3% / +1.4% full / causal; 40, 44 and 48 gain less or lose: where the
// branch lands reshapes ptxas's schedule), but after 32 beside a position bias (36 costs relative position 1.5%),
// D = 64 after 72 of 96 (+3.7% / +0.9%; 84 and 96 lose), D = 256 after all 40 (+5.8% / +4.3%: its larger P V
// has not finished after 20).
template <int kHeadDim, typename Policy>
constexpr int kRetireAfterExps = kHeadDim == 256 ? 40 : kHeadDim == 64 ? 72 : Policy::kPositionBias ? 32 : 36;
// The row max of a softmax step as one running maximum, or at D = 128 as two (the thread's even and odd key
// columns, joined at the end): +0.4-0.6% full, level causal there (runs 174-175); D = 64 loses 3-4% with two and
// D = 256 is level; four or eight chains, or a pairwise tree, gain less or lose at D = 128 (runs 48, 173-174).
template <int kHeadDim>
constexpr int kRowMaxChains = kHeadDim == 128 ? 2 : 1;
// At D = 128 a kv step (not a tile's first kv tile) releases K_j's stage as soon as S_j has landed, so that the
// producer's next K load waits for no softmax: +0.2-0.3% full, +0.1-0.2% causal, +0.3% sustained (runs 185-186),
// +0.4-0.7% for softcap and the document mask (run 191). After the softmax otherwise: D = 64 loses 0.2-0.4% and
// D = 256 is level (run 186), a position bias (alibi) loses 1.2%, and releasing the first kv tile's early cost a
// sparse mask, whose tiles visit one or two kv tiles, 0.9% (sliding window, runs 190-191). Runs 53-59 preferred
// the release after the softmax at D = 128 too, when P V retired at the step's top.
template <int kHeadDim, typename Policy>
constexpr bool kReleaseKOnScores = kHeadDim == 128 && !Policy::kPositionBias;
// At D = 64 a tile's V is loaded one kv step behind its K (K_j, then V_{j-1}: the order a step uses them, S_j
// being issued before P_{j-1} V_{j-1}), and a consumer waits for V_{j-1} after issuing S_j: +0.9-1.2% full,
// +0.6-0.9% causal (runs 186, 192). D = 128 loses 0.6-0.8% with the load order alone, D = 256 0.3% (3% with the
// late wait too).
template <int kHeadDim>
constexpr bool kVBehindK = kHeadDim == 64;
// The 160-key entry points leave a remainder in the last kv tile at the usual lengths (S_K = 8k: 32 keys, 16k: 64):
// where a work tile's last kv tile holds at most kNarrowKeys keys of the sequence, that tile's step runs narrow: its
// softmax over those keys' scores only, its P V over their rows (kNarrowKeys / 16 k slices). The keys past the end
// would have -inf scores, zero probabilities and TMA's zero-filled V rows, so the narrow step gives the same bits;
// the lift reads the flag as false. +0.7% full at 8k, +0.35% at 16k (run 257): the last tile's softmax is a work
// tile's tail, which no other group's GEMM hides. The narrow step is its own copy of the kv step, after the loop (a
// branch inside the loop's step reshapes the loop). Its S GEMM stays the whole tile's: a narrow one made ptxas
// serialize every wgmma inside the loop's step (C7515), and as part of the step after the loop it made the loop
// reload a parameter and reorder its exps, 1% slower (runs 252-254). Only softmax kernels whose masked step is
// score_tile's alone take it (no mask loads or bits, no unswitched mask loops, the P V retired inside the softmax).
template <int kBlockKv, typename Policy>
constexpr bool kNarrowsLastKvTile = kBlockKv == 160 && Policy::kSoftmax && !Policy::kUnswitchedMask &&
                                    !Policy::kRetireAtStepTop && !Policy::kMaskLoads && !Policy::kMaskBits;
constexpr int kNarrowKeys = 64;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLowestFloat = -3.40282347e+38f;  // -FLT_MAX
constexpr float kLog2e = 1.4426950408889634f;

// Named barriers (0 is __syncthreads): ping-pong turns of consumer groups 0 and 1, one per group for its
// epilogue, then one pair per group for the tile-index hand-off with the producer warp (slot written, slot
// read). Per-group pairs keep the groups independent: a shared one would line them up at every tile start
// and undo the ping-pong offset.
constexpr int kTurnBarrier0 = 1;
constexpr int kEpilogueBarrier0 = 3;
constexpr int kTileWrittenBarrier0 = 5;
constexpr int kTileReadBarrier0 = 7;
constexpr int kHandoffThreads = 32 + kWarpGroupThreads;  // the producer warp + one consumer group

// ---------------------------------------------------------------------------------------------------------
// Shared memory: every tile is a sequence of [rows][64] panels, 1024-byte aligned, written by TMA with the
// 128-byte swizzle that wgmma descriptors expect.
template <int kHeadDim, int kBlockKv>
struct SharedLayout {
  static constexpr int kPanels = kHeadDim / kPanelCols;
  static constexpr int kQPanelBytes = kConsumerRows * kPanelCols * 2;  // [64][64]
  static constexpr int kKvPanelBytes = kBlockKv * kPanelCols * 2;  // [kBlockKv][64]
  static constexpr int kQHalfBytes = kQPanelBytes * kPanels;               // one consumer's 64 rows of Q
  static constexpr int kKvTileBytes = kKvPanelBytes * kPanels;
  static constexpr int kOHalfBytes = kQHalfBytes;
  // D = 256: each group stages its O in its own Q half, which its last Q K^T has finished reading; the
  // group releases Q only once the TMA store has read the staged O.
  static constexpr bool kOInQ = kHeadDim == 256;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kConsumerGroups * kQHalfBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKvTileBytes;
  static constexpr int kKvEnd = kVOffset + kStages * kKvTileBytes;
  static constexpr int kOOffset = kOInQ ? kQOffset : kKvEnd;
  static constexpr int kBarrierOffset = kKvEnd + (kOInQ ? 0 : kConsumerGroups * kOHalfBytes);
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kTileSlotOffset = kBarrierOffset + kBarriers * 8;  // the Q buffer's tile index
  static constexpr int kAlignSlack = 1024;  // the dynamic block is re-aligned to 1024 bytes
  static constexpr int kBytes = kTileSlotOffset + 16 + kAlignSlack;
};

static_assert(SharedLayout<128, 128>::kBytes <= 227 * 1024, "D = 128 tiles exceed the 227 KB shared-memory limit");
static_assert(SharedLayout<128, 160>::kBytes <= 227 * 1024, "D = 128 tiles of 160 keys exceed the 227 KB limit");
static_assert(SharedLayout<64, 192>::kBytes <= 227 * 1024, "D = 64 tiles exceed the 227 KB shared-memory limit");
static_assert(SharedLayout<256, 80>::kBytes <= 227 * 1024, "D = 256 tiles exceed the 227 KB shared-memory limit");

template <typename T, int kHeadDim, int kBlockKv>
struct SharedStorage {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  unsigned char* base;

  __device__ T* q_half(int group) const { return reinterpret_cast<T*>(base + Layout::kQOffset + group * Layout::kQHalfBytes); }
  __device__ T* k_tile(int stage) const { return reinterpret_cast<T*>(base + Layout::kKOffset + stage * Layout::kKvTileBytes); }
  __device__ T* v_tile(int stage) const { return reinterpret_cast<T*>(base + Layout::kVOffset + stage * Layout::kKvTileBytes); }
  __device__ T* o_half(int group) const { return reinterpret_cast<T*>(base + Layout::kOOffset + group * Layout::kOHalfBytes); }
  // The GEMM operands' tiles by their wgmma address (gemm_tile_address): the base's, converted once, plus the
  // tile's byte offset / 16, so that a step's descriptors cost one add each.
  __device__ uint32_t address_at(int offset) const { return gemm_tile_address(base) + offset / 16; }
  __device__ uint32_t q_half_address(int group) const { return address_at(Layout::kQOffset + group * Layout::kQHalfBytes); }
  __device__ uint32_t k_tile_address(int stage) const { return address_at(Layout::kKOffset + stage * Layout::kKvTileBytes); }
  __device__ uint32_t v_tile_address(int stage) const { return address_at(Layout::kVOffset + stage * Layout::kKvTileBytes); }
  __device__ uint64_t* barriers() const { return reinterpret_cast<uint64_t*>(base + Layout::kBarrierOffset); }
  __device__ uint64_t* q_full() const { return barriers(); }
  __device__ uint64_t* q_empty() const { return barriers() + 1; }
  __device__ uint64_t* k_full(int stage) const { return barriers() + 2 + stage; }
  __device__ uint64_t* k_empty(int stage) const { return barriers() + 2 + kStages + stage; }
  __device__ uint64_t* v_full(int stage) const { return barriers() + 2 + 2 * kStages + stage; }
  __device__ uint64_t* v_empty(int stage) const { return barriers() + 2 + 3 * kStages + stage; }
  // Linear index of the tile the consumers start next (or past the end: stop). Written by the producer warp
  // between kTileReadBarrier and kTileWrittenBarrier, read by the consumers between the two.
  __device__ int* tile_slot() const { return reinterpret_cast<int*>(base + Layout::kTileSlotOffset); }
};

// ---------------------------------------------------------------------------------------------------------
// Pipeline: a running count of kv tiles passed through the kStages buffers; stage and phase parity follow.
struct PipelineState {
  int count = 0;
  __device__ int stage() const { return count % kStages; }
  __device__ uint32_t parity() const { return (count / kStages) & 1; }
  // The producer waits on "empty" with the opposite parity: a fresh barrier counts as already released.
  __device__ uint32_t free_parity() const { return parity() ^ 1; }
};

// One consumer warp's release of a buffer it finished reading (empty barriers count kConsumerWarps).
__device__ __forceinline__ void release(uint64_t* empty_barrier, int lane) {
  if (lane == 0) mbarrier_arrive(empty_barrier);
}

// ---------------------------------------------------------------------------------------------------------
// Tile scheduler: a persistent grid walks linear tile indices; decode() maps one to (q_tile, head, batch).
// Heads run in chunks of p.head_chunk (head, batch) pairs; inside a chunk q tiles go from last to first
// (longest causal tiles first), heads fastest. The host sizes a dynamic schedule's chunk so that its K and V
// fit in about 32 MB of L2 (causal tiles of one chunk finish at different times and restart at kv tile 0, so
// its CTAs read all of its K/V at once); the static schedule's chunk is one pair, whose K/V stays in L2.
// A block-list variant (Policy::kHostTileOrder) takes its order from the host (p.tile_order): the same chunks,
// each longest first, and its last waves longest first across chunks, so that the last tiles claimed are short.
// Each CTA starts at blockIdx.x. The static schedule then strides by gridDim.x (equal tiles: full masks);
// the dynamic one takes the next unclaimed index from p.tile_counter (causal: tiles differ in length, and
// claiming in longest-first order balances the CTAs to within one short tile). Only the producer calls
// next(); it hands each index to the consumers through SharedStorage::tile_slot.
struct TileScheduler {
  const AttentionParams& p;  // read from the kernel's parameter bank on every use: no registers held
  bool host_order;           // Policy::kHostTileOrder: decode reads p.tile_order when the host passes one

  __device__ int num_q_tiles() const { return (p.seqlen_q + kBlockM - 1) / kBlockM; }
  __device__ int total() const { return num_q_tiles() * p.batch * p.num_heads_q; }

  // Dynamic: the producer claims each next tile and hands it to the consumers (SharedStorage::tile_slot);
  // static: every role walks the same stride on its own.
  __device__ bool dynamic() const { return p.tile_counter != nullptr; }
  __device__ int first() const { return blockIdx.x; }
  // The index after `linear` for this CTA. Dynamic: one global atomic, issued a tile ahead of its use.
  __device__ int next(int linear) const {
    return dynamic() ? gridDim.x + atomicAdd(p.tile_counter, 1) : linear + gridDim.x;
  }
  __device__ bool valid(int linear) const { return linear < total(); }

  __device__ WorkTile decode(int linear) const {
    const int q_tiles = num_q_tiles();
    if (host_order && p.tile_order != nullptr) {  // tile (batch * HQ + head) * q_tiles + q_tile at `linear`
      const int tile = __ldg(p.tile_order + linear);
      const int pair = tile / q_tiles;
      return WorkTile{tile % q_tiles, pair % p.num_heads_q, pair / p.num_heads_q};
    }
    const int head_chunk = p.head_chunk;
    const int chunk_tiles = head_chunk * q_tiles;
    const int chunk = linear / chunk_tiles;
    const int within = linear - chunk * chunk_tiles;
    const int first_pair = chunk * head_chunk;
    const int width = min(head_chunk, p.batch * p.num_heads_q - first_pair);
    const int pair = first_pair + within % width;
    return WorkTile{q_tiles - 1 - within / width, pair % p.num_heads_q, pair / p.num_heads_q};
  }
};

// Rows [first, last] of a work tile: the rows its policy's kv range is computed for.
__device__ __forceinline__ int first_row(const WorkTile& tile) { return tile.q_tile * kBlockM; }
__device__ __forceinline__ int last_row(const AttentionParams& p, const WorkTile& tile) {
  return min(first_row(tile) + kBlockM, p.seqlen_q) - 1;
}

// ---------------------------------------------------------------------------------------------------------
// Variant policies (cubridge/variant.cuh): everything an instance computes beyond softmax(scale Q K^T) V goes
// through a policy's members, and nothing else in this file differs between variants. examples/ir/attention_sm90.mlir
// mirrors the FullAttention instance; cuir-opt --lower writes a transferred variant as a policy derived from
// FullAttention that overrides the members whose CuIR changed (docs/lowering.md).

// [variant policy] cuir-opt --lower inserts a transferred variant's policy after this line.

// ---------------------------------------------------------------------------------------------------------
// Producer: one warp; it hands each scheduled tile to the consumers and its lane 0 streams the tile's Q (two
// 64-row halves), K and V.
// One K or V tile (kBlockKv rows from kv_row, every panel) into `tile`, counted on `full`; returns once issued.
template <int kHeadDim, int kBlockKv, typename T>
__device__ __forceinline__ void load_kv_tile(T* tile, const CUtensorMap* map, uint64_t* full, int kv_row, int kv_head,
                                             int batch) {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  mbarrier_expect_tx(full, Layout::kKvTileBytes);
  for (int panel = 0; panel < Layout::kPanels; ++panel)
    tma_load_4d(reinterpret_cast<unsigned char*>(tile) + panel * Layout::kKvPanelBytes, map, full, panel * kPanelCols,
                kv_row, kv_head, batch);
}

// K/V pairs (Policy::kSharesKvInPair; full masks at D = 128): the two CTAs of a cluster run consecutive query tiles
// of one head under the static schedule (the host launches pairs only on an even grid where a head's query tiles
// are even in number), so they read the same K and V rows in the same order. Each producer loads one of a kv tile's
// two 64-column panels into both CTAs (TMA multicast): every K and V byte leaves the L2 once per pair (run 221: 0.52
// of the unmerged L2 sectors against 0.83; run 227: +2.1% work per joule at the power cap). A stage is refilled once both
// CTAs' consumers released it: two relay warps of each producer warp group (K's, V's) pass every release of their
// CTA on to the `pair_free` barrier of that stage in both CTAs as soon as it completes, and the loading warp waits
// on its own (relayed by the loading warp, a release waited while that warp waited on another stage: 0.3-0.6%
// slower in bursts, run 235).
constexpr int kPairCtas = 2;

// The `pair_free` barrier `index` of this CTA: a K stage's (first kStages), then a V stage's; each phase completes
// with one arrival from each CTA's relay warp.
__device__ __forceinline__ uint64_t* pair_free(int index) {
  __shared__ uint64_t barriers[2 * kStages];
  return barriers + index;
}

// A K or V tile into stage `at` of this CTA and of its peer, counted on `full` in each. The whole warp waits until
// both CTAs released the stage (`pair_free`, whose phase completes after this CTA's own release too: the loader
// waits on nothing else); lane 0 then multicasts this CTA's panel. Returns once issued.
template <int kHeadDim, int kBlockKv, typename T>
__device__ __forceinline__ void load_pair_kv_tile(T* tile, const CUtensorMap* map, uint64_t* full, uint64_t* free_barrier,
                                                  const PipelineState& at, bool leader, int kv_row, int kv_head,
                                                  int batch) {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  static_assert(Layout::kPanels == kPairCtas, "each CTA of a pair loads one panel");
  const uint32_t rank = cluster_cta_rank();
  mbarrier_wait(free_barrier, at.free_parity());
  if (leader) {
    mbarrier_expect_tx(full, Layout::kKvTileBytes);
    tma_load_4d_multicast(reinterpret_cast<unsigned char*>(tile) + rank * Layout::kKvPanelBytes, map, full,
                          (1 << kPairCtas) - 1, rank * kPanelCols, kv_row, kv_head, batch);
  }
}

// K/V pairs: a relay warp passing this CTA's release of every K (or, `values`, V) stage on to both CTAs' pair_free
// barriers for that stage, in fill order. The static schedule only: it walks the loading warp's tiles on its own.
// Returns after the release of the last tile's last stage.
template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ void relay_pair_releases(const SharedStorage<T, kHeadDim, kBlockKv>& smem,
                                                    const AttentionParams& p, const typename Policy::Args& args,
                                                    bool values, int lane) {
  const TileScheduler scheduler{p, Policy::kHostTileOrder};
  const uint32_t peer = cluster_cta_rank() ^ 1;
  PipelineState kv;
  for (int linear = scheduler.first(); scheduler.valid(linear); linear = scheduler.next(linear)) {
    const WorkTile tile = scheduler.decode(linear);
    const KvRange range = Policy::template kv_range<kBlockKv>(p, args, tile, first_row(tile), last_row(p, tile));
    for (int j = range.begin; j < range.end; ++j, ++kv.count) {
      mbarrier_wait(values ? smem.v_empty(kv.stage()) : smem.k_empty(kv.stage()), kv.parity());
      if (lane == 0) {
        uint64_t* free_barrier = pair_free((values ? kStages : 0) + kv.stage());
        mbarrier_arrive(free_barrier);
        mbarrier_arrive_cluster(free_barrier, peer);
      }
    }
  }
}

// Policy::kSkipsEmptyTiles: the rows of a work tile that visits no kv tile, as the consumers would leave them
// (O = 0 and, under softmax, LSE = -inf), written by the producer warp that skips the tile. The tile's rows are one
// run of O's memory.
template <typename T, int kHeadDim, typename Policy>
__device__ __forceinline__ void write_empty_tile(const AttentionParams& p, const WorkTile& tile, int lane) {
  constexpr int kRowVectors = kHeadDim * sizeof(T) / sizeof(uint4);
  const int rows = last_row(p, tile) - first_row(tile) + 1;
  const int64_t first = (int64_t(tile.batch) * p.num_heads_q + tile.head) * p.seqlen_q + first_row(tile);
  uint4* out = reinterpret_cast<uint4*>(static_cast<T*>(p.out) + first * kHeadDim);
  for (int i = lane; i < rows * kRowVectors; i += 32) out[i] = make_uint4(0u, 0u, 0u, 0u);
  if (Policy::kSoftmax && p.lse != nullptr)
    for (int row = lane; row < rows; row += 32) p.lse[first + row] = kNegInf;
}

// Policy::kSkipsEmptyTiles (dynamic schedule): from `linear` on, claims past the tiles whose kv range is empty,
// writing their rows; returns the first tile that visits a kv tile, or one past the schedule. Every lane of the
// producer warp returns the same index.
template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ int claim_past_empty_tiles(const AttentionParams& p, const typename Policy::Args& args,
                                                      const TileScheduler& scheduler, int linear, int lane) {
  while (scheduler.valid(linear)) {
    const WorkTile tile = scheduler.decode(linear);
    const KvRange range = Policy::template kv_range<kBlockKv>(p, args, tile, first_row(tile), last_row(p, tile));
    if (range.end > range.begin) break;
    write_empty_tile<T, kHeadDim, Policy>(p, tile, lane);
    int next_linear = 0;
    if (lane == 0) next_linear = scheduler.next(linear);
    linear = __shfl_sync(0xffffffffu, next_linear, 0);
  }
  return linear;
}

template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ void producer_mainloop(const SharedStorage<T, kHeadDim, kBlockKv>& smem,
                                                  const AttentionParams& p,
                                                  const typename Policy::Args& args, const CUtensorMap* q_map,
                                                  const CUtensorMap* k_map, const CUtensorMap* v_map, int lane) {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  const TileScheduler scheduler{p, Policy::kHostTileOrder};
  const bool leader = lane == 0;
  PipelineState kv;
  int linear = scheduler.first();
  for (int tile_count = 0;; ++tile_count) {
    if constexpr (Policy::kSkipsEmptyTiles)
      linear = claim_past_empty_tiles<T, kHeadDim, kBlockKv, Policy>(p, args, scheduler, linear, lane);
    // Hand the tile (or the end of the schedule) to the consumers once they hold the previous one and
    // released its Q buffer.
    mbarrier_wait(smem.q_empty(), (tile_count & 1) ^ 1);
    if (scheduler.dynamic()) {
      for (int group = 0; group < kConsumerGroups && tile_count > 0; ++group)
        named_barrier_sync(kTileReadBarrier0 + group, kHandoffThreads);
      if (leader) *smem.tile_slot() = linear;
      for (int group = 0; group < kConsumerGroups; ++group)
        named_barrier_arrive(kTileWrittenBarrier0 + group, kHandoffThreads);
    }
    if (!scheduler.valid(linear)) return;
    const WorkTile tile = scheduler.decode(linear);
    int next_linear = 0;
    if (leader) {
      mbarrier_expect_tx(smem.q_full(), kConsumerGroups * Layout::kQHalfBytes);
      for (int group = 0; group < kConsumerGroups; ++group)
        for (int panel = 0; panel < Layout::kPanels; ++panel)
          tma_load_4d(reinterpret_cast<unsigned char*>(smem.q_half(group)) + panel * Layout::kQPanelBytes, q_map,
                      smem.q_full(), panel * kPanelCols, tile.q_tile * kBlockM + group * kConsumerRows, tile.head,
                      tile.batch);
      next_linear = scheduler.next(linear);  // in flight while this tile's K and V stream in
    }
    // The whole warp walks the K/V pipeline (its mbarrier waits), so that it reaches the next hand-off
    // converged; lane 0 issues the copies.
    const int kv_head = tile.head / (p.num_heads_q / p.num_heads_kv);
    const KvRange range = Policy::template kv_range<kBlockKv>(p, args, tile, first_row(tile), last_row(p, tile));
    auto load_v = [&](const PipelineState& at, int row) {
      if constexpr (!Policy::kSharesKvInPair)  // pairs: load_pair_kv_tile's pair_free wait implies this one
        mbarrier_wait(smem.v_empty(at.stage()), at.free_parity());
      if constexpr (Policy::kSharesKvInPair)
        load_pair_kv_tile<kHeadDim, kBlockKv>(smem.v_tile(at.stage()), v_map, smem.v_full(at.stage()),
                                              pair_free(kStages + at.stage()), at, leader, row,
                                              kv_head, tile.batch);
      else if (leader)
        load_kv_tile<kHeadDim, kBlockKv>(smem.v_tile(at.stage()), v_map, smem.v_full(at.stage()), row, kv_head, tile.batch);
    };
    // The kv row of the next position is looked up a step ahead: block lists read it from global memory, and
    // the lookup then overlaps this step's waits instead of delaying its loads (past the end it reads an
    // unused slot, or 0 outside the table, and is never loaded).
    int kv_row = Policy::kv_tile(p, args, tile, range.begin) * kBlockKv;
    int behind_row = kv_row;  // kVBehindK: the previous position's kv row, whose V follows this position's K
    for (int j = range.begin; j < range.end; ++j, ++kv.count) {
      const int next_kv_row = Policy::kv_tile(p, args, tile, j + 1) * kBlockKv;
      const int stage = kv.stage();
      if constexpr (!Policy::kSharesKvInPair)
        mbarrier_wait(smem.k_empty(stage), kv.free_parity());
      if constexpr (Policy::kSharesKvInPair)
        load_pair_kv_tile<kHeadDim, kBlockKv>(smem.k_tile(stage), k_map, smem.k_full(stage),
                                              pair_free(stage), kv, leader, kv_row, kv_head,
                                              tile.batch);
      else if (leader)
        load_kv_tile<kHeadDim, kBlockKv>(smem.k_tile(stage), k_map, smem.k_full(stage), kv_row, kv_head,
                                         tile.batch);
      if constexpr (kVBehindK<kHeadDim>) {
        if (j > range.begin) load_v(PipelineState{kv.count - 1}, behind_row);
        behind_row = kv_row;
      } else {
        load_v(kv, kv_row);
      }
      kv_row = next_kv_row;
    }
    if constexpr (kVBehindK<kHeadDim>) {
      if (range.end > range.begin) load_v(PipelineState{kv.count - 1}, behind_row);
    }
    linear = __shfl_sync(0xffffffffu, next_linear, 0);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Softmax over this thread's fragment of a 64 x 128 score tile (wgmma accumulator layout: element e is row
// g + 8 * ((e >> 1) & 1), column 8 * (e >> 2) + 2 t + (e & 1) of the warp's 16 rows; g = lane / 4,
// t = lane % 4). Each thread holds two rows; a row's 128 values live in the 4 lanes of a quad.
struct RowState {
  float max[2];  // running max of the raw (unscaled) scores
  float sum[2];  // this thread's partial sums of exp2; the quad reduces them in the epilogue
};

// The row and the column (key) of element e of this thread's fragment of a score tile whose first row is row0 and
// first key n0 (the layout above).
__device__ __forceinline__ int fragment_row(int row0, int e) { return row0 + 8 * ((e >> 1) & 1); }
__device__ __forceinline__ int fragment_col(int n0, int t, int e) { return n0 + 8 * (e >> 2) + 2 * t + (e & 1); }

// The keep() results of a policy whose mask loads from tables (Policy::kMaskLoads) or comes as bits
// (Policy::kMaskBits), one bit per score of this thread's fragment (set: kept, and before seqlen_k). The consumer
// takes them at the top of a tile's step, ahead of its mbarrier waits and GEMMs: evaluated from key columns
// loaded during the step before (LaneColumns), or the bits themselves, loaded then.
template <int kCount>
struct KeptScores {
  uint32_t bits[(kCount + 31) / 32];
};

// A mask's per-key values (Policy::kMaskColumns) of one kv tile as this lane loads them: lane l those of keys
// n0 + l + 32 i; a score takes its key's from the lane that holds them (kept_scores), a few coalesced loads per
// thread instead of one per key.
template <typename Policy, int kCount>
struct LaneColumns {
  typename Policy::Columns of[(kCount + 15) / 16];
};

template <typename Policy, int kCount>
__device__ __forceinline__ LaneColumns<Policy, kCount> lane_columns(const typename Policy::Args& args,
                                                                    const WorkTile& tile, int n0) {
  LaneColumns<Policy, kCount> lane = {};
  if constexpr (Policy::kMaskColumns) {
#pragma unroll
    for (int i = 0; i < (kCount + 15) / 16; ++i)
      lane.of[i] = Policy::columns(tile.batch, tile.head, n0 + 32 * i + threadIdx.x % 32, args);
  }
  return lane;
}

template <typename Policy, int kCount>
__device__ __forceinline__ KeptScores<kCount> kept_scores(const AttentionParams& p, const typename Policy::Args& args,
                                                          const WorkTile& tile, int row0, int n0, int t,
                                                          const LaneColumns<Policy, kCount>& lane) {
  KeptScores<kCount> kept = {};
  // Keys before seqlen_k are those whose offset in the fragment, 8 (e >> 2) + (e & 1), is below this: one
  // compare with a constant per key column, no key index computed.
  const int key_limit = p.seqlen_k - n0 - 2 * t;
  // Elements e and e ^ 2 are the thread's two rows at one key, so a key's values move once for both.
  typename Policy::Columns key_columns[kCount / 2];
  if constexpr (Policy::kMaskColumns) {
#pragma unroll
    for (int e = 0; e < kCount; ++e)  // the key's values are those of lane (col - n0) % 32, entry e / 16
      if (!(e & 2))
        key_columns[e / 4 * 2 + e % 2] = warp_shuffle(lane.of[e >> 4], (fragment_col(n0, t, e) - n0) & 31);
  }
#pragma unroll
  for (int e = 0; e < kCount; ++e) {
    const int row = fragment_row(row0, e);
    const int col = fragment_col(n0, t, e);
    bool keep;
    if constexpr (Policy::kMaskColumns)
      keep = Policy::keep(tile.batch, tile.head, row, col, key_columns[e / 4 * 2 + e % 2], args);
    else
      keep = Policy::keep(tile.batch, tile.head, row, col, args);
    kept.bits[e / 32] |= static_cast<uint32_t>(keep & (8 * (e >> 2) + (e & 1) < key_limit)) << (e % 32);
  }
  return kept;
}

// A work tile's keep() bits as the runtime computed them (Policy::kMaskBits; kernel_inputs.visit_order_bits says
// the layout: the bounds are in them too), by position of the tile's kv sequence: this consumer thread's words of
// position 0, in the plane of the tile's batch entry and head (one plane where the mask reads neither); position
// j's lie j * mask_bits.dims[4] words on. A block-list policy's masked positions are its partial tiles, positions
// 0 .. kv_num_blocks - 1, so a masked step finds its bits without looking its kv tile up.
template <typename Policy, int kCount>
__device__ __forceinline__ const uint32_t* thread_mask_bits(const typename Policy::Args& args, const WorkTile& tile,
                                                            int consumer_thread) {
  const auto& bits = args.mask_bits;
  const int b = bits.dims[0] == 1 ? 0 : tile.batch;
  const int h = bits.dims[1] == 1 ? 0 : tile.head;
  const int64_t plane = static_cast<int64_t>(b) * bits.dims[1] + h;
  const int64_t first_tile = (plane * bits.dims[2] + tile.q_tile) * bits.dims[3];
  return bits.data + first_tile * bits.dims[4] + consumer_thread * ((kCount + 31) / 32);
}

// This thread's keep() bits of position `position` (thread_bits: thread_mask_bits; tile_words: mask_bits.dims[4]).
template <int kCount>
__device__ __forceinline__ KeptScores<kCount> loaded_bits(const uint32_t* thread_bits, int position, int tile_words) {
  const uint32_t* __restrict__ words = thread_bits + static_cast<int64_t>(position) * tile_words;
  KeptScores<kCount> kept;
#pragma unroll
  for (int w = 0; w < (kCount + 31) / 32; ++w) kept.bits[w] = words[w];
  return kept;
}

// The variant's scores of one kv tile starting at key n0, for the rows row0 and row0 + 8 of this thread:
// modify_score on every tile (after the scale, when kScaled; a position bias reassociated), then, only where
// `masked`, -inf for the keys past seqlen_k and those mask_mod drops (from `kept` where the mask loads tables or
// comes as bits).
template <typename Policy, bool kScaled, int kCount>
__device__ __forceinline__ void score_tile(float (&s)[kCount], const AttentionParams& p,
                                           const typename Policy::Args& args, const WorkTile& tile, int row0,
                                           int n0, bool masked, int t, const KeptScores<kCount>& kept) {
  auto row_of = [&](int e) { return fragment_row(row0, e); };
  auto col_of = [&](int e) { return fragment_col(n0, t, e); };
  if constexpr (Policy::kPositionBias) {
    // score + slope (q_idx - kv_idx), the difference split into a row part (two conversions per tile) and the
    // fragment column's offset from the thread's first key (a constant): one FFMA per score after the scale's.
    const float slope = Policy::position_slope(tile.batch, tile.head, args);
    const float row_bias[2] = {slope * static_cast<float>(row_of(0) - col_of(0)),
                               slope * static_cast<float>(row_of(2) - col_of(0))};
#pragma unroll
    for (int e = 0; e < kCount; ++e)
      s[e] = fmaf(s[e], p.scale, fmaf(-slope, static_cast<float>(col_of(e) - col_of(0)), row_bias[(e >> 1) & 1]));
  } else if constexpr (Policy::kModifiesScores) {
#pragma unroll
    for (int e = 0; e < kCount; ++e)
      s[e] = Policy::modify_score(s[e] * p.scale, tile.batch, tile.head, row_of(e), col_of(e), args);
  } else if constexpr (kScaled) {
#pragma unroll
    for (int e = 0; e < kCount; ++e) s[e] *= p.scale;
  }
  if (!masked) return;
  if constexpr (Policy::kMaskLoads || Policy::kMaskBits) {
#pragma unroll
    for (int e = 0; e < kCount; ++e)
      if (!((kept.bits[e / 32] >> (e % 32)) & 1u)) s[e] = kNegInf;
  } else {
    // keep() runs for every score, past seqlen_k too, not behind the bounds test: a mask of integer arithmetic
    // (share-question's floor divisions) is then if-converted instead of branched around (run 74 against 80).
#pragma unroll
    for (int e = 0; e < kCount; ++e) {
      const bool kept = Policy::keep(tile.batch, tile.head, row_of(e), col_of(e), args);
      if (col_of(e) >= p.seqlen_k || !kept) s[e] = kNegInf;
    }
  }
}

// Online softmax step: raises the running max with this tile's scores, returns in `alpha` the factor
// exp2((old max - new max) * scale_log2) that rescales the running sum (done here) and O (done by `between`),
// and turns the scores into probabilities. `between(sum)` runs once kRetireAfter of the thread's exps are summed
// (`sum`: its row half's so far): the P V in flight retires there, under the remaining exps. The row max runs as
// kMaxChains running maxima (kRowMaxChains).
template <int kFmaExp2Period, int kRetireAfter, int kMaxChains, int kCount, typename Between>
__device__ __forceinline__ void softmax_update(float (&s)[kCount], RowState& state, float (&alpha)[2],
                                               float scale_log2, Between&& between) {
  static_assert(kRetireAfter % 2 == 0 && 2 <= kRetireAfter && kRetireAfter <= kCount,
                "between runs once: after a whole pair of a thread's exps");
  float max_scaled[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tile_max = state.max[half];
    if constexpr (kMaxChains == 2) {
      float even_max = s[2 * half];
      float odd_max = s[2 * half + 1];
#pragma unroll
      for (int i = 1; i < kCount / 4; ++i) {
        even_max = fmaxf(even_max, s[4 * i + 2 * half]);
        odd_max = fmaxf(odd_max, s[4 * i + 2 * half + 1]);
      }
      tile_max = fmaxf(tile_max, fmaxf(even_max, odd_max));
    } else {
#pragma unroll
      for (int i = 0; i < kCount / 4; ++i)
        tile_max = fmaxf(tile_max, fmaxf(s[4 * i + 2 * half], s[4 * i + 2 * half + 1]));
    }
    const float new_max = row_reduce_max(tile_max);
    // The exp2 offset, floored: finite for a row with no visible key so far (max -inf) and for one whose every
    // score vanishes in base 2 (max * scale_log2 overflows, as torch.finfo(float32).min does), so exp2 sees no NaN
    // and such a row sums to 0: output 0, LSE -inf, as FlexAttention's kernels give.
    max_scaled[half] = fmaxf(new_max * scale_log2, kLowestFloat);
    alpha[half] = fast_exp2(state.max[half] * scale_log2 - max_scaled[half]);
    state.max[half] = new_max;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kCount / 4; ++i) {
#pragma unroll
      for (int e = 4 * i + 2 * half; e < 4 * i + 2 * half + 2; ++e) {
        const float exponent = fmaf(s[e], scale_log2, -max_scaled[half]);
        if constexpr (kFmaExp2Period > 0)
          s[e] = e % kFmaExp2Period == kFmaExp2Period - 1 ? fma_exp2(exponent) : fast_exp2(exponent);
        else
          s[e] = fast_exp2(exponent);
        sum += s[e];
      }
      if (half * (kCount / 2) + 2 * (i + 1) == kRetireAfter) between(sum);
    }
    state.sum[half] = state.sum[half] * alpha[half] + sum;
  }
}

// Whether scores are scaled before the policy sees them (a score_mod, or an activation of the scaled score);
// otherwise the softmax folds the scale into its exp2 FFMA and keeps the row max over unscaled scores.
template <typename Policy>
constexpr bool kScoresScaled = Policy::kModifiesScores || !Policy::kSoftmax;

// The normalization of one score tile: the online softmax, or P = activate(score) with nothing to rescale
// (alpha = 1, row sums unused); `between(value)` runs inside it, once `value` (a partial row sum of the softmax,
// or the last activation) is computed.
template <typename Policy, int kHeadDim, int kCount, typename Between>
__device__ __forceinline__ void normalize_scores(float (&s)[kCount], RowState& state, float (&alpha)[2],
                                                 const AttentionParams& p, Between&& between) {
  if constexpr (Policy::kSoftmax) {
    softmax_update<kFmaExp2Period<kHeadDim, Policy>, kRetireAfterExps<kHeadDim, Policy>, kRowMaxChains<kHeadDim>>(
        s, state, alpha, kScoresScaled<Policy> ? kLog2e : p.scale_log2, between);
  } else {
#pragma unroll
    for (int e = 0; e < kCount; ++e) s[e] = Policy::activate(s[e]);
    alpha[0] = alpha[1] = 1.f;
    between(s[kCount - 1]);
  }
}

// Packs the probabilities to 16 bits in the register layout of a wgmma A operand.
template <typename T, int kCount>
__device__ __forceinline__ void pack_probs(const float (&s)[2 * kCount], uint32_t (&probs)[kCount]) {
#pragma unroll
  for (int j = 0; j < kCount; ++j) probs[j] = convert_pack<T>(s[2 * j], s[2 * j + 1]);
}

template <int kCount>
__device__ __forceinline__ void rescale_rows(float (&acc)[kCount], const float (&alpha)[2]) {
#pragma unroll
  for (int e = 0; e < kCount; ++e) acc[e] *= alpha[(e >> 1) & 1];
}

// Ping-pong: a consumer group issues its GEMMs only on its turn, then hands the turn to the other group.
__device__ __forceinline__ void begin_gemm_turn(int group) {
  named_barrier_sync(kTurnBarrier0 + group, kConsumerGroups * kWarpGroupThreads);
}
__device__ __forceinline__ void end_gemm_turn(int group) {
  named_barrier_arrive(kTurnBarrier0 + (1 - group), kConsumerGroups * kWarpGroupThreads);
}

// ---------------------------------------------------------------------------------------------------------
// Epilogue of one consumer group: O / row sum -> 16 bits -> swizzled shared tile -> TMA store; LSE by row.
template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ void epilogue(float (&o)[kHeadDim / 2], const RowState& state, const AttentionParams& p,
                                         const SharedStorage<T, kHeadDim, kBlockKv>& smem, const CUtensorMap* o_map,
                                         const WorkTile& tile, int group, int thread_in_group) {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  const int warp = thread_in_group / 32;
  const int lane = thread_in_group % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int group_row0 = tile.q_tile * kBlockM + group * kConsumerRows;
  // An activation's P needs no division by row sums and has no LSE.
  float inverse[2] = {1.f, 1.f};
  if constexpr (Policy::kSoftmax) {
    const float lse_scale = kScoresScaled<Policy> ? 1.f : p.scale;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = row_reduce_sum(state.sum[half]);
      inverse[half] = sum > 0.f ? 1.f / sum : 0.f;
      const int row = group_row0 + 16 * warp + g + 8 * half;
      if (p.lse != nullptr && t == 0 && row < p.seqlen_q) {
        const int64_t index = (int64_t(tile.batch) * p.num_heads_q + tile.head) * p.seqlen_q + row;
        p.lse[index] = sum > 0.f ? state.max[half] * lse_scale + logf(sum) : kNegInf;
      }
    }
  }
  // The previous tile's TMA store must have read o_half before it is overwritten.
  const bool issuer = thread_in_group == 0;
  if (issuer) store_async_wait<0>();
  named_barrier_sync(kEpilogueBarrier0 + group, kWarpGroupThreads);
  unsigned char* o_tile = reinterpret_cast<unsigned char*>(smem.o_half(group));
#pragma unroll
  for (int e = 0; e < kHeadDim / 2; e += 2) {
    const int row = 16 * warp + g + 8 * ((e >> 1) & 1);
    const int chunk = e >> 2;  // 8-column chunk of the head dim
    const int panel = chunk / 8;
    const int swizzled = (chunk % 8) ^ (row % 8);
    const uint32_t packed = convert_pack<T>(o[e] * inverse[(e >> 1) & 1], o[e + 1] * inverse[(e >> 1) & 1]);
    *reinterpret_cast<uint32_t*>(o_tile + panel * Layout::kQPanelBytes + row * 128 + swizzled * 16 + 4 * t) = packed;
  }
  fence_async_shared();
  named_barrier_sync(kEpilogueBarrier0 + group, kWarpGroupThreads);
  if (issuer && group_row0 < p.seqlen_q) {
    for (int panel = 0; panel < Layout::kPanels; ++panel)
      tma_store_4d(o_map, o_tile + panel * Layout::kQPanelBytes, panel * kPanelCols, group_row0, tile.head,
                   tile.batch);
    store_async_commit();
  }
  if constexpr (Layout::kOInQ) {  // O was staged in this group's Q half: Q is free once the store read it
    if (issuer) store_async_wait<0>();
    named_barrier_sync(kEpilogueBarrier0 + group, kWarpGroupThreads);
    release(smem.q_empty(), lane);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Consumer: one warp group, 64 query rows of every scheduled tile.
template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ void consumer_mainloop(const SharedStorage<T, kHeadDim, kBlockKv>& smem,
                                                  const AttentionParams& p, const typename Policy::Args& args,
                                                  const CUtensorMap* o_map, int group, int thread_in_group) {
  using Layout = SharedLayout<kHeadDim, kBlockKv>;
  constexpr int kQkSlices = kHeadDim / 16;
  constexpr int kPvSlices = kBlockKv / 16;
  const int warp = thread_in_group / 32;
  const int lane = thread_in_group % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const TileScheduler scheduler{p, Policy::kHostTileOrder};
  // Q's tile by address, from a uniform group index: its descriptors stay in uniform registers (runs 132, 168)
  const uint32_t q_half = smem.q_half_address(__shfl_sync(0xffffffffu, group, 0));

  if (group == 1) named_barrier_arrive(kTurnBarrier0, kConsumerGroups * kWarpGroupThreads);  // group 0 starts
  // An empty TMA-store group: the first epilogue's store wait, like every later one, has a group to wait for
  // (the .mlir carries the store token from tile to tile).
  if (thread_in_group == 0) store_async_commit();

  PipelineState kv;
  int linear = scheduler.first();
  for (int tile_count = 0;; ++tile_count) {
    if (scheduler.dynamic()) {
      named_barrier_sync(kTileWrittenBarrier0 + group, kHandoffThreads);
      linear = *smem.tile_slot();
    } else if (tile_count > 0) {
      linear = scheduler.next(linear);
    }
    if (!scheduler.valid(linear)) break;
    if (scheduler.dynamic()) named_barrier_arrive(kTileReadBarrier0 + group, kHandoffThreads);
    const WorkTile tile = scheduler.decode(linear);
    const int group_row0 = tile.q_tile * kBlockM + group * kConsumerRows;
    const int thread_row0 = group_row0 + 16 * warp + g;
    const KvRange range = Policy::template kv_range<kBlockKv>(p, args, tile, first_row(tile), last_row(p, tile));
    // The position of the narrow step (range.end: none).
    const int narrow_position =
        kNarrowsLastKvTile<kBlockKv, Policy> && range.end - range.begin > 1 &&
                p.seqlen_k - Policy::kv_tile(p, args, tile, range.end - 1) * kBlockKv <= kNarrowKeys
            ? range.end - 1
            : range.end;
    float s[kScoreRegs<kBlockKv>];
    float o[kHeadDim / 2];
    uint32_t probs[kProbRegs<kBlockKv>];
    float alpha[2];
    RowState state = {{kNegInf, kNegInf}, {0.f, 0.f}};
    // The first key of the kv tile at `position`: looked up at the top of its step (block lists read it from
    // global memory), so that the load is in flight during the step's waits and GEMMs.
    auto first_key = [&](int position) { return Policy::kv_tile(p, args, tile, position) * kBlockKv; };
    // The scores of a kv tile (keys from n0): the variant's score_mod, its mask where the tile is `masked`, then
    // the normalization (with `between` inside it), then P packed as the A operand of the next P V.
    auto scores_to_probs = [&](bool masked, int n0, const KeptScores<kScoreRegs<kBlockKv>>& kept, auto&& between) {
      score_tile<Policy, kScoresScaled<Policy>>(s, p, args, tile, thread_row0, n0, masked, t, kept);
      normalize_scores<Policy, kHeadDim>(s, state, alpha, p, between);
      if constexpr (!Policy::kRetireAtStepTop) pack_probs<T>(s, probs);
    };
    // A masked tile's keep() bits, for policies whose mask loads from tables, taken at the top of its step
    // (position j, first key n0) from the key columns a masked step loads for the next position while its
    // GEMMs run (`ahead`, of position `ahead_position`; loaded here when they are another position's). With the
    // loads after the score GEMM and the bits computed there, the loads' latency made ptxas place the S wait
    // before the shuffles and compares that follow them (runs 114-115: +3-8% on document masks).
    // Policies with mask bits (kMaskBits) load the bits themselves the same way, a step ahead.
    LaneColumns<Policy, kScoreRegs<kBlockKv>> ahead = {};
    KeptScores<kScoreRegs<kBlockKv>> ahead_bits = {};
    int ahead_position = -1;
    const uint32_t* thread_bits = nullptr;
    if constexpr (Policy::kMaskBits) {
      const int consumer_thread = group * kWarpGroupThreads + thread_in_group;
      thread_bits = thread_mask_bits<Policy, kScoreRegs<kBlockKv>>(args, tile, consumer_thread);
    }
    auto kept_ahead = [&](bool masked, int n0, int j) {
      KeptScores<kScoreRegs<kBlockKv>> kept = {};
      if constexpr (Policy::kMaskBits) {
        if (masked) {
          if (ahead_position != j)
            ahead_bits = loaded_bits<kScoreRegs<kBlockKv>>(thread_bits, j, args.mask_bits.dims[4]);
          kept = ahead_bits;
        }
      } else if constexpr (Policy::kMaskLoads) {
        if (masked) {
          if (ahead_position != j) ahead = lane_columns<Policy, kScoreRegs<kBlockKv>>(args, tile, n0);
          kept = kept_scores<Policy, kScoreRegs<kBlockKv>>(p, args, tile, thread_row0, n0, t, ahead);
        }
      }
      return kept;
    };
    // The first key of position j + 1, looked up at the top of a masked step j, and its key columns loaded after
    // the step's GEMMs are issued (bits are found by position: no lookup).
    auto next_first_key = [&](bool masked, int j) {
      int next_n0 = 0;
      if constexpr (Policy::kMaskLoads && !Policy::kMaskBits)
        if (masked) next_n0 = first_key(j + 1);
      return next_n0;
    };
    auto load_ahead = [&](bool masked, int next_n0, int j) {
      if constexpr (Policy::kMaskBits) {
        if (masked) {
          // clamped to the table: a work tile whose every position is masked loads ahead past its last one
          ahead_bits = loaded_bits<kScoreRegs<kBlockKv>>(thread_bits, min(j + 1, args.mask_bits.dims[3] - 1),
                                                         args.mask_bits.dims[4]);
          ahead_position = j + 1;
        }
      } else if constexpr (Policy::kMaskLoads) {
        if (masked) {
          ahead = lane_columns<Policy, kScoreRegs<kBlockKv>>(args, tile, next_n0);
          ahead_position = j + 1;
        }
      }
    };
#pragma unroll
    for (int e = 0; e < kHeadDim / 2; ++e) o[e] = 0.f;

    mbarrier_wait(smem.q_full(), tile_count & 1);

    // The first kv tile (position range.begin): S = Q K^T, then its softmax; its K stage is released after it at
    // every D (see kReleaseKOnScores).
    {
      const int n0 = first_key(range.begin);
      const bool masked = range.needs_mask(range.begin);
      const auto kept = kept_ahead(masked, n0, range.begin);
      const int next_n0 = next_first_key(true, range.begin);
      const int stage = kv.stage();
      mbarrier_wait(smem.k_full(stage), kv.parity());
      begin_gemm_turn(group);
      gemm_fence_operand(s);
      gemm_fence();
      gemm_async<kBlockKv, kQkSlices, false, T>(s, q_half, Layout::kQPanelBytes, smem.k_tile_address(stage),
                                               Layout::kKvPanelBytes, false);
      end_gemm_turn(group);
      load_ahead(true, next_n0, range.begin);
      gemm_wait<0>();
      gemm_fence_operand(s);
      scores_to_probs(masked, n0, kept, [](float) {});  // no P V in flight, O is zero
      release(smem.k_empty(stage), lane);
      ++kv.count;
    }

    // kRetireAtStepTop: retires P_{j-2} V_{j-2} (if position j-2 is in the range: `in_flight`) at the top of step
    // j, after its mbarrier waits (in a later basic block than the softmax), then packs P_{j-1} and rescales O.
    auto retire_pv = [&](bool in_flight) {
      if constexpr (Policy::kRetireAtStepTop) {
        const PipelineState retired{kv.count - 2};
        gemm_wait<0>();
        gemm_fence_operand(o);
        gemm_fence_operand(probs);
        if (in_flight) release(smem.v_empty(retired.stage()), lane);
        pack_probs<T>(s, probs);
        rescale_rows(o, alpha);
      }
    };

    // Position j in begin+1..end-1: issue S_j = Q K_j^T and O += P_{j-1} V_{j-1}, then the softmax of S_j under P V.
    // P V retires inside the softmax, after kRetireAfterExps of its exps (gemm_wait_after: a wait in the softmax's
    // basic block would be issued before the exps), and O is rescaled there, so that the next step issues its
    // GEMMs right after its mbarrier waits: +1.6% non-causal, +3% causal (run 156). V_{j-1} is waited for before
    // K_j, the order the producer issued them (kVBehindK: after S_j's issue); K_j's stage is released once S_j has
    // landed or after the softmax (kReleaseKOnScores).
    auto kv_step = [&](int j, bool masked, bool narrow) {
      const int n0 = first_key(j);
      const auto kept = kept_ahead(masked, n0, j);
      const int next_n0 = next_first_key(masked, j);
      const int stage = kv.stage();
      const PipelineState prev{kv.count - 1};
      if constexpr (!kVBehindK<kHeadDim>) mbarrier_wait(smem.v_full(prev.stage()), prev.parity());
      mbarrier_wait(smem.k_full(stage), kv.parity());
      retire_pv(j > range.begin + 1);
      begin_gemm_turn(group);
      gemm_fence_operand(s);
      gemm_fence_operand(o);
      gemm_fence_operand(probs);
      gemm_fence();
      gemm_async<kBlockKv, kQkSlices, false, T>(s, q_half, Layout::kQPanelBytes, smem.k_tile_address(stage),
                                               Layout::kKvPanelBytes, false);
      if constexpr (kVBehindK<kHeadDim>) mbarrier_wait(smem.v_full(prev.stage()), prev.parity());
      gemm_async_rs<kHeadDim, kPvSlices, T>(o, probs, smem.v_tile_address(prev.stage()), Layout::kKvPanelBytes,
                                            true);
      end_gemm_turn(group);
      load_ahead(masked, next_n0, j);
      gemm_wait<1>();
      gemm_fence_operand(s);
      if constexpr (kReleaseKOnScores<kHeadDim, Policy>) release(smem.k_empty(stage), lane);
      auto retire_pv_in_softmax = [&](float exps_sum) {
        if constexpr (!Policy::kRetireAtStepTop) {
          gemm_wait_after(exps_sum);
          gemm_fence_operand(o);
          gemm_fence_operand(probs);
          release(smem.v_empty(prev.stage()), lane);
          rescale_rows(o, alpha);
        }
      };
      if (narrow) {  // the P V in flight retires after all of the narrow softmax's exps
        auto& narrow_s = reinterpret_cast<float(&)[kNarrowKeys / 2]>(s);  // the first kNarrowKeys keys' scores
        score_tile<Policy, kScoresScaled<Policy>>(narrow_s, p, args, tile, thread_row0, n0, true, t,
                                                  KeptScores<kNarrowKeys / 2>{});
        softmax_update<kFmaExp2Period<kHeadDim, Policy>, kNarrowKeys / 2, kRowMaxChains<kHeadDim>>(
            narrow_s, state, alpha, kScoresScaled<Policy> ? kLog2e : p.scale_log2, retire_pv_in_softmax);
        pack_probs<T>(narrow_s, reinterpret_cast<uint32_t(&)[kNarrowKeys / 4]>(probs));
      } else {
        scores_to_probs(masked, n0, kept, retire_pv_in_softmax);
      }
      if constexpr (!kReleaseKOnScores<kHeadDim, Policy>) release(smem.k_empty(stage), lane);
      ++kv.count;
    };
    if constexpr (Policy::kUnswitchedMask) {
      // The same steps in the same order, as a masked, a mask-free and a masked loop: each body is compiled for
      // its case, so the mask-free one carries no mask code (block lists: +3-9%, run 105).
      const int mask_free_begin = min(max(range.full_begin, range.begin + 1), range.end);
      const int mask_free_end = max(min(range.full_end, range.end), mask_free_begin);
      for (int j = range.begin + 1; j < mask_free_begin; ++j) kv_step(j, true, false);
      for (int j = mask_free_begin; j < mask_free_end; ++j) kv_step(j, false, false);
      for (int j = mask_free_end; j < range.end; ++j) kv_step(j, true, false);
    } else {
      for (int j = range.begin + 1; j < narrow_position; ++j) kv_step(j, range.needs_mask(j), false);
      if constexpr (kNarrowsLastKvTile<kBlockKv, Policy>)
        if (narrow_position < range.end) kv_step(narrow_position, true, true);
    }
    if constexpr (!Layout::kOInQ) release(smem.q_empty(), lane);

    // Last P V of the tile.
    {
      const PipelineState last{kv.count - 1};
      mbarrier_wait(smem.v_full(last.stage()), last.parity());
      retire_pv(range.end - range.begin > 1);
      begin_gemm_turn(group);
      gemm_fence_operand(o);
      gemm_fence_operand(probs);
      gemm_fence();
      if (kNarrowsLastKvTile<kBlockKv, Policy> && narrow_position < range.end)
        gemm_async_rs<kHeadDim, kNarrowKeys / 16, T>(o, reinterpret_cast<const uint32_t(&)[kNarrowKeys / 4]>(probs),
                                                     smem.v_tile_address(last.stage()), Layout::kKvPanelBytes, true);
      else
        gemm_async_rs<kHeadDim, kPvSlices, T>(o, probs, smem.v_tile_address(last.stage()), Layout::kKvPanelBytes,
                                              true);
      end_gemm_turn(group);
      gemm_wait<0>();
      gemm_fence_operand(o);
      gemm_fence_operand(probs);
      release(smem.v_empty(last.stage()), lane);
    }

    epilogue<T, kHeadDim, kBlockKv, Policy>(o, state, p, smem, o_map, tile, group, thread_in_group);
  }

  // Balance the ping-pong: group 1's opening arrival on group 0's barrier is still pending.
  if (group == 0) begin_gemm_turn(0);
  if (thread_in_group == 0) store_async_wait<0>();
}

// ---------------------------------------------------------------------------------------------------------
template <typename T, int kHeadDim, int kBlockKv, typename Policy>
__device__ __forceinline__ void attention_forward(const CUtensorMap* q_map, const CUtensorMap* k_map,
                                                  const CUtensorMap* v_map, const CUtensorMap* o_map,
                                                  const AttentionParams& p, const typename Policy::Args& args) {
  extern __shared__ unsigned char shared_raw[];
  // Offsetting the __shared__ array itself (not a round trip through an integer) keeps the pointers in the
  // shared window, so plain stores to them compile to STS rather than generic ST.
  const SharedStorage<T, kHeadDim, kBlockKv> smem{shared_raw + ((1024 - (smem_u32(shared_raw) & 1023)) & 1023)};

  if (threadIdx.x == 0) {
    mbarrier_init(smem.q_full(), 1);
    mbarrier_init(smem.q_empty(), kConsumerWarps);
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(smem.k_full(stage), 1);
      mbarrier_init(smem.k_empty(stage), kConsumerWarps);
      mbarrier_init(smem.v_full(stage), 1);
      mbarrier_init(smem.v_empty(stage), kConsumerWarps);
    }
    if constexpr (Policy::kSharesKvInPair) {
      for (int i = 0; i < 2 * kStages; ++i) mbarrier_init(pair_free(i), kPairCtas);
      fence_mbarrier_init_cluster();
      if (((p.seqlen_q + kBlockM - 1) / kBlockM) % kPairCtas != 0) __trap();  // a pair's tiles: one head
    }
    fence_async_shared();
  }
  if constexpr (Policy::kSharesKvInPair)
    cluster_sync();  // the peer's barriers are initialized before any remote arrival or multicast reaches them
  else
    barrier();

  const int warp_group = threadIdx.x / kWarpGroupThreads;
  if (warp_group == 0) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x < 32) producer_mainloop<T, kHeadDim, kBlockKv, Policy>(smem, p, args, q_map, k_map, v_map, threadIdx.x);
    if constexpr (Policy::kSharesKvInPair) {  // warps 1 and 2: the K and the V releases
      if (threadIdx.x >= 32 && threadIdx.x < 96)
        relay_pair_releases<T, kHeadDim, kBlockKv, Policy>(smem, p, args, threadIdx.x >= 64, threadIdx.x % 32);
    }
  } else {
    setmaxnreg_inc<kConsumerRegisters>();
    consumer_mainloop<T, kHeadDim, kBlockKv, Policy>(smem, p, args, o_map, warp_group - 1,
                                           threadIdx.x - warp_group * kWarpGroupThreads);
  }
  if constexpr (Policy::kSharesKvInPair) cluster_sync();  // no CTA exits while its peer may still write to it
}

}  // namespace

// Entry points: attention_sm90_<dtype>_d<head dim>[_kv<keys>]_<variant>[_pairs]. Launch with kThreads (384) threads,
// a persistent grid of at most one CTA per SM (_pairs: an even one), and SharedLayout<D, kBlockKv>::kBytes of dynamic
// shared memory.
// Tensor maps: Q and O box [1, 1, 64, 64], K and V box [1, 1, kBlockKv, 64], all 128-byte swizzled. `args` is the
// policy's Args (one unused byte when empty).
// Keys per kv tile: 128 at D = 128; 192 at D = 64, whose step has half the GEMM work of D = 128's per key, so that
// the step's fixed costs (waits, turns, row reductions) weigh less; 80 at D = 256, where a consumer's O takes 128
// registers a thread and two K and two V stages of 40 KB fit beside Q only with O staged in Q's buffer
// (SharedLayout::kOInQ). The _kv160 entry points (full masks, D = 128), which the host takes from S_K = 8192 on,
// run 160-key tiles: 4.4 instructions a key against 4.6, +0.8% at S_K = 8k and +2% at 16k, level at 4k (run 211).
// 128 stays the lifted instance's (variants' block lists follow FlexAttention's 128-key blocks) and causal's
// (160 lost 1.5% causal at 4k, run 138).
#define CUBRIDGE_ATTENTION_SM90_ENTRY(name, T, head_dim, block_n, Policy)                                      \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                                                   \
      name(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,              \
           const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map,              \
           const AttentionParams p, const Policy::Args args) {                                                 \
    attention_forward<T, head_dim, block_n, Policy>(&q_map, &k_map, &v_map, &o_map, p, args);                 \
  }
// K/V pairs (kSharesKvInPair): clusters of two CTAs, launched on an even grid where a head's query tiles are even in
// number (attention_sm90.shares_kv_in_pairs).
struct FullAttentionInPairs : FullAttention {
  static constexpr bool kSharesKvInPair = true;
};
#define CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(name, T, head_dim, block_n, Policy)                                 \
  extern "C" __global__ void __launch_bounds__(kThreads, 1) __cluster_dims__(kPairCtas, 1, 1)                  \
      name(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,              \
           const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map,              \
           const AttentionParams p, const Policy::Args args) {                                                 \
    attention_forward<T, head_dim, block_n, Policy>(&q_map, &k_map, &v_map, &o_map, p, args);                 \
  }

// [entry points] cuir-opt --lower replaces the instances below with the variant's.
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_full, __nv_bfloat16, 128, 128, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_causal, __nv_bfloat16, 128, 128, CausalAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_full, __half, 128, 128, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_causal, __half, 128, 128, CausalAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d128_kv160_full, __nv_bfloat16, 128, 160, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d128_kv160_full, __half, 128, 160, FullAttention)
CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_bf16_d128_full_pairs, __nv_bfloat16, 128, 128, FullAttentionInPairs)
CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_fp16_d128_full_pairs, __half, 128, 128, FullAttentionInPairs)
CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_bf16_d128_kv160_full_pairs, __nv_bfloat16, 128, 160, FullAttentionInPairs)
CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY(attention_sm90_fp16_d128_kv160_full_pairs, __half, 128, 160, FullAttentionInPairs)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d64_full, __nv_bfloat16, 64, 192, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d64_causal, __nv_bfloat16, 64, 192, CausalAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d64_full, __half, 64, 192, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d64_causal, __half, 64, 192, CausalAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d256_full, __nv_bfloat16, 256, 80, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d256_causal, __nv_bfloat16, 256, 80, CausalAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d256_full, __half, 256, 80, FullAttention)
CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_fp16_d256_causal, __half, 256, 80, CausalAttention)
