// Skinny products for decode: y = x w^T (+ bias) with few rows of x (m <= 4), where the time is
// one pass over the weight. cuBLASLt reads small weights (e.g. 6144 x 4096) at ~0.5 of the copy
// bandwidth at m = 1 (docs/perf/gpu.md, G5); this kernel streams each weight row once with
// 16-byte loads, several in flight per lane, and keeps the few activation rows in L1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// The most rows of x the skinny kernel takes; more go to cuBLASLt. On an H100 (docs/perf/gpu.md)
/// it beats cuBLASLt by 1.1-1.4x at m = 1..4 on Llama-3-8B's shapes and loses at m = 8, where
/// every warp re-reads 8 rows of x for 2 weight rows.
inline constexpr std::int64_t kSkinnyGemmMaxRows = 4;

/// Row-major like cuda::LinearGemm: x [m, k], w [n, k], bias [n], y [m, n].
struct SkinnyGemmParams {
  const void* x = nullptr;     ///< [m, k], dtype
  const void* w = nullptr;     ///< [n, k], dtype
  const void* bias = nullptr;  ///< [n], dtype; nullptr for none
  void* y = nullptr;           ///< [m, n], dtype, or fp32 when output_f32
  std::int64_t m = 0;          ///< 1 .. kSkinnyGemmMaxRows
  std::int64_t n = 0;
  std::int64_t k = 0;                                ///< a multiple of 8 (one 16-byte load)
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< kBF16 or kF16
  bool output_f32 = false;                           ///< the LM head's fp32 logits
};

/// True when `p` can run here: 16-bit dtype, 1 <= m <= kSkinnyGemmMaxRows, k % 8 == 0,
/// 16-byte aligned x and w. Otherwise the caller uses cuBLASLt.
bool skinny_gemm_applies(const SkinnyGemmParams& p);

/// Each output is an fp32 sum over k, rounded once to the output type.
Status launch_skinny_gemm(const SkinnyGemmParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
