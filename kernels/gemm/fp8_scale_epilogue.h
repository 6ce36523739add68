// The FP8 W8A8 epilogue where cuBLASLt cannot scale per row (Hopper: no OUTER_VEC FP8
// algorithm): cuBLASLt writes the fp32 sums of the codes' products, and this kernel applies the
// token's and the channel's scales and the bias, rounding once to the output type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct Fp8ScaleEpilogueParams {
  const float* sums = nullptr;      ///< [m, n] fp32: sum over k of x_code * w_code
  const float* x_scales = nullptr;  ///< [m]
  const float* w_scales = nullptr;  ///< [n]
  const void* bias = nullptr;       ///< [n] dtype, or nullptr
  void* y = nullptr;                ///< [m, n] dtype
  std::int64_t m = 0;
  std::int64_t n = 0;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< kBF16 or kF16
};

/// y[i, j] = round(sums[i, j] * x_scales[i] * w_scales[j] + bias[j]), the product and sum in
/// fp32 in that order (the order cuBLASLt's scaled epilogue uses).
Status launch_fp8_scale_epilogue(const Fp8ScaleEpilogueParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
