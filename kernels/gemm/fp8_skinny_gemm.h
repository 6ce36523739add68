// Skinny FP8 W8A8 products for decode: y = (x_codes w_codes^T) * x_scale * w_scale (+ bias) with
// few rows of x (m <= 16), where the time is one pass over the weight codes. cuBLASLt's FP8 GEMM is
// built for large m: with it an 8B model's batch-1 decode moved its weight bytes at 0.54 of the
// copy bandwidth on an H200 (0.83 with BF16 weights through skinny_gemm.h). This kernel streams
// each weight row once with 16-byte loads, eight per row in flight per lane, and multiplies on the
// tensor cores: 16 weight rows are the M side of mma.m16n8k16 and x's rows its N side, both as f16
// (E4M3 widens to f16 exactly).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// The most rows of x the kernel takes: two 8-row mma tiles of x. Per round a lane loads 32 bytes
/// of weights and 16 bytes of x per tile; with 8 rounds in flight 16 rows hold 64 registers of
/// weights and 64 of x, and a third tile would have to cut the weights in flight (what keeps the
/// memory busy) or spill. Beyond 16 rows x's bytes, re-read from L1/L2 by every 16 channels,
/// outnumber the weights' too; cuBLASLt takes those m.
inline constexpr std::int64_t kFp8SkinnyGemmMaxRows = 16;

/// How a warp streams its weights; both compute the same bits.
enum class Fp8SkinnyVariant {
  /// PAGODA_FP8_SKINNY's choice: whole-span (the default) or pipelined.
  kAuto,
  /// 512 columns a warp per iteration: all 16 weight loads issued, then the math.
  kWholeSpan,
  /// The same 512-column spans in two 256-column register stages: the next stage's loads in
  /// flight during the current one's math. Written without a GPU at hand; run 30 decides
  /// between them.
  kPipelined,
};

/// Row-major like cuda::Fp8SumsGemm: x [m, k], w [n, k], y [m, n].
struct Fp8SkinnyGemmParams {
  const std::uint8_t* x = nullptr;  ///< [m, k] E4M3 codes
  const float* x_scales = nullptr;  ///< [m]: one per row of x (token)
  const std::uint8_t* w = nullptr;  ///< [n, k] E4M3 codes (quant/fp8_channel_layout.h)
  const float* w_scales = nullptr;  ///< [n]: one per output channel
  const void* bias = nullptr;       ///< [n] dtype, or nullptr
  void* y = nullptr;                ///< [m, n] dtype
  std::int64_t m = 0;               ///< 0 .. kFp8SkinnyGemmMaxRows
  std::int64_t n = 0;               ///< 1 .. 2^30
  std::int64_t k = 0;               ///< 1 .. 2^30
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< kBF16 or kF16
  Fp8SkinnyVariant variant = Fp8SkinnyVariant::kAuto;
};

/// y[i, j] = round(((sum_c x[i, c] w[j, c]) * x_scales[i]) * w_scales[j] + bias[j]): the codes'
/// products summed in fp32 on the tensor cores, then fp8_scale_epilogue's operations in its order,
/// each rounded to fp32, then one rounding to dtype. Any k and any alignment: with k % 16 == 0 and
/// 16-byte aligned x and w (every Fp8Linear) the codes come in 16-byte loads, else byte by byte.
/// m == 0 launches nothing. Capturable in a CUDA graph (no allocation, no synchronization).
/// INVALID_ARGUMENT, naming the variable, for kAuto under an unknown PAGODA_FP8_SKINNY.
Status launch_fp8_skinny_gemm(const Fp8SkinnyGemmParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
