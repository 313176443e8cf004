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

// cuir.gather: table[index...] through the read-only cache; an index outside the table reads 0.
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
  return inside ? __ldg(table.data + flat) : T(0);
}

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
