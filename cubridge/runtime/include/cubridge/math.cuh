// CuBridge device primitives: per-thread math and register-level reductions/conversions.
// One function per CuIR op; each comment says what the op does and what has completed when it returns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace cubridge {

// math.exp2 inside cuir.map: ex2.approx.ftz.f32. Returns 2^x (about 2 ulp; denormals flush to zero,
// exp2(-inf) = 0). Completes in registers.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// math.exp2 inside cuir.map, evaluated on the FMA pipe, for a kernel whose MUFU is its busiest unit: 2^x for
// x <= 0 as 2^n (added to the exponent bits) times a cubic in f = x - n, with n = round(x) and f in [-1/2, 1/2]
// (relative error 1.0e-4, under half a bf16 rounding step); x <= -127 and -inf give +0. Eight FMA-pipe
// instructions where fast_exp2 is one MUFU. Completes in registers.
__device__ __forceinline__ float fma_exp2(float x) {
  constexpr float kRoundingBias = 12582912.f;  // 1.5 * 2^23: x + this holds round(x) in its low mantissa bits
  x = fmaxf(x, -127.f);                        // n = -127, f = 0: the exponent bits cancel to exactly +0
  const float biased = __fadd_rn(x, kRoundingBias);
  const float f = __fsub_rn(x, __fsub_rn(biased, kRoundingBias));
  const float p = fmaf(fmaf(fmaf(0.05500871f, f, 0.24221069f), f, 0.6932829f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(biased) << 23));
}

// math.tanh inside cuir.map: tanh.approx.f32. Returns tanh(x) (max relative error about 2^-11).
// Completes in registers.
__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// x - k pi with k = round(x / pi), returned in `k`: pi in three fp32 parts, each FMA subtracting k times one part
// rounded once. Absolute error under 1e-7 for |x| <= 2^20 (|result| at most about pi / 2 + 0.1).
__device__ __forceinline__ float reduce_by_pi(float x, int& k) {
  constexpr float kInversePi = 3.18309873e-01f;
  constexpr float kPiHigh = 3.14159274e+00f;     // 0x40490fdb: pi rounded to fp32
  constexpr float kPiMiddle = -8.74227766e-08f;  // 0xb3bbbd2e: pi - kPiHigh rounded
  constexpr float kPiLow = -3.43024902e-15f;     // 0xa7772ced: what remains, rounded
  const float turns = rintf(x * kInversePi);
  k = static_cast<int>(turns);
  x = fmaf(-turns, kPiHigh, x);
  x = fmaf(-turns, kPiMiddle, x);
  return fmaf(-turns, kPiLow, x);
}

// math.sin inside cuir.map: sin(x) = (-1)^k sin(x - k pi), the reduction in FMAs (reduce_by_pi) and sin.approx
// (the MUFU) on the reduced argument: absolute error about 5e-7 for |x| <= 2^20. sin.approx on x itself (__sinf)
// reduces in one fp32 multiply, an error that grows with |x| (near 0.1 at 2^20; it changed the sign of sin(q_idx)
// at q_idx = 1065). Completes in registers.
__device__ __forceinline__ float accurate_sin(float x) {
  int k;
  const float sine = __sinf(reduce_by_pi(x, k));
  return (k & 1) ? -sine : sine;
}

// math.cos inside cuir.map: cos(x) = (-1)^k cos(x - k pi), as accurate_sin (absolute error about 5e-7 for
// |x| <= 2^20). Completes in registers.
__device__ __forceinline__ float accurate_cos(float x) {
  int k;
  const float cosine = __cosf(reduce_by_pi(x, k));
  return (k & 1) ? -cosine : cosine;
}

// cuir.row_reduce (max): max over the 4 lanes of a quad (lanes 4g..4g+3), which together hold one row
// of an mma.sync accumulator fragment. Every lane of the quad returns the row maximum.
__device__ __forceinline__ float row_reduce_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// cuir.row_reduce (sum): sum over the 4 lanes of a quad that hold one accumulator row.
// Every lane of the quad returns the row sum.
__device__ __forceinline__ float row_reduce_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// cuir.convert: two fp32 values -> one packed 32-bit register of two 16-bit floats (round to nearest
// even); `lo` lands in the low half, as mma.sync operands and little-endian memory expect.
template <typename T>
__device__ __forceinline__ uint32_t convert_pack(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t convert_pack<__nv_bfloat16>(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

template <>
__device__ __forceinline__ uint32_t convert_pack<__half>(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

}  // namespace cubridge
