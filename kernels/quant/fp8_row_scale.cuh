// Per-row dynamic FP8 (E4M3) quantization of activations, the rule every producer of an FP8 GEMM
// input follows (the standalone quantizer, RMSNorm's fused output), so fused and unfused give
// the same bits and the host can reproduce them (quant::float_to_fp8_e4m3, the same fp32 ops):
//
//   amax = max |v| over the row (v as stored: already rounded to the activation dtype)
//   scale = amax / 448,  code = e4m3_rn_satfinite(v * (448 / amax));  a zero row: codes 0, scale 1
//
// so v ~= scale * code with E4M3's 3-bit mantissa (relative error <= 2^-4 per element).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace pagoda::kernels {

inline constexpr float kFp8E4M3Max = 448.0f;

struct Fp8RowScale {
  float inverse;  ///< multiplies v into the code's range
  float scale;    ///< what the GEMM multiplies a code by
};

__device__ __forceinline__ Fp8RowScale fp8_row_scale(float amax) {
  if (!(amax > 0.0f)) return {0.0f, 1.0f};
  return {__fdiv_rn(kFp8E4M3Max, amax), __fdiv_rn(amax, kFp8E4M3Max)};
}

__device__ __forceinline__ std::uint8_t fp8_code(float v, float inverse) {
  return static_cast<std::uint8_t>(
      __nv_cvt_float_to_fp8(__fmul_rn(v, inverse), __NV_SATFINITE, __NV_E4M3));
}

}  // namespace pagoda::kernels
