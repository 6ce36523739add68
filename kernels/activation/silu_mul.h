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
  /// Optional: out also as E4M3 codes [num_tokens, width] with one fp32 scale per token in
  /// out_fp8_scales, by kernels/quant/fp8_row_scale.cuh's rule applied to out as stored (the
  /// same bits launch_fp8_quantize_rows would give from out): an FP8 down projection's input,
  /// without its own quantization pass. Both or neither; 16-bit dtype.
  std::uint8_t* out_fp8 = nullptr;
  float* out_fp8_scales = nullptr;
};

/// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), in fp32, rounded once.
Status launch_silu_mul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
