// The parameters and constants of small grid-scheduled Ampere kernels for the lit tests.
#include "cubridge/ampere.cuh"
#include "cubridge/sync.cuh"

namespace {
using namespace cubridge;

struct AttentionParams {
  const void* q;
  const void* k;
  void* o;
  int64_t q_stride_b, q_stride_h, q_stride_s;
  int64_t k_stride_b, k_stride_h, k_stride_s;
  int64_t o_stride_b, o_stride_h, o_stride_s;
  int seqlen_q;
  int seqlen_k;
};

constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kHeadDim = 64;
constexpr int kStages = 1;
constexpr int kThreads = 128;
}  // namespace
