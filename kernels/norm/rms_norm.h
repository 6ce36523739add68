// RMSNorm and the fused residual-add + RMSNorm between sublayers: one read of x and the residual,
// one write of each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct RmsNormParams {
  const void* x = nullptr;  ///< [num_tokens, hidden], dtype
  /// [num_tokens, hidden], dtype, in/out; nullptr for a plain RMSNorm of x. When set:
  /// residual += x (rounded to dtype), then out = rms_norm(residual).
  void* residual = nullptr;
  const void* weight = nullptr;  ///< [hidden], dtype
  void* out = nullptr;           ///< [num_tokens, hidden], dtype; may not alias x or residual
  std::int64_t num_tokens = 0;
  std::int64_t hidden = 0;
  float eps = 1e-6f;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
  /// Optional, for an FP8 GEMM next: out again as E4M3 codes [num_tokens, hidden] and per-row
  /// scales [num_tokens], by kernels/quant/fp8_row_scale.cuh's rule applied to out as stored
  /// (the same bits launch_fp8_quantize_rows would give from out). Both or neither; 16-bit dtype.
  std::uint8_t* out_fp8 = nullptr;
  float* out_fp8_scales = nullptr;
};

/// out = weight * (v * rsqrt(mean(v^2) + eps)) per row, v = x or the updated residual; the mean
/// of squares in fp32, one rounding to dtype at the end.
Status launch_rms_norm(const RmsNormParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
