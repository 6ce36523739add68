// Dynamic per-token FP8 quantization of a 16-bit activation matrix: the input of an FP8 GEMM
// (cuda::BlasLt::linear_fp8) where no fused producer writes it (fp8_row_scale.cuh has the rule;
// RMSNorm writes its output this way itself, RmsNormParams::out_fp8).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct Fp8QuantizeParams {
  const void* x = nullptr;        ///< [rows, cols], dtype
  std::uint8_t* codes = nullptr;  ///< [rows, cols] E4M3
  float* scales = nullptr;        ///< [rows]
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
};

Status launch_fp8_quantize_rows(const Fp8QuantizeParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
