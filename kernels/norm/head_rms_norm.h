// Per-head RMSNorm in place (Qwen3's and Gemma 3's q_norm / k_norm): each head's head_dim values
// of each token are one row, read from a strided buffer such as the fused QKV output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct HeadRmsNormParams {
  /// Token t's head h starts at x + t * row_stride + h * head_dim (elements), dtype; in/out.
  void* x = nullptr;
  std::int64_t row_stride = 0;   ///< elements between tokens (e.g. the QKV row width)
  const void* weight = nullptr;  ///< [head_dim], dtype, shared by every head
  std::int64_t num_tokens = 0;
  std::int64_t num_heads = 0;
  std::int64_t head_dim = 0;
  float eps = 1e-6f;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
};

/// x[t, h] = weight * (x[t, h] * rsqrt(mean(x[t, h]^2) + eps)); the mean of squares in fp32, one
/// rounding to dtype at the end, as launch_rms_norm.
Status launch_head_rms_norm(const HeadRmsNormParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
