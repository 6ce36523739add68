// The SwiGLU gate: silu(gate) * up over the fused gate_up projection's output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct SiluMulParams {
  /// [num_tokens, gate_up_row_stride]: gate at columns [0, width), up at [width, 2 * width).
  const void* gate_up = nullptr;
  std::int64_t gate_up_row_stride = 0;  ///< elements; at least 2 * width
  void* out = nullptr;                  ///< [num_tokens, width]
  std::int64_t num_tokens = 0;
  std::int64_t width = 0;  ///< the MLP's intermediate size
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
};

/// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), in fp32, rounded once.
Status launch_silu_mul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
