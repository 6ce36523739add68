// An FP8 W8A8 linear layer on the device: E4M3 weight codes with per-channel scales
// (quant/fp8_channel_layout.h), activations quantized per token on the way in, then the product:
// at decode's m (<= kFp8SkinnyGemmMaxRows) the skinny kernel (fp8_skinny_gemm.h), which streams
// the weights at the memory's pace; above it cuBLASLt's FP8 GEMM, scaled per row by cuBLASLt
// itself where it can (cuda::BlasLt::linear_fp8, OUTER_VEC scales), else fp32 sums in scratch,
// row-chunked, then fp8_scale_epilogue (Hopper). A producer that writes FP8 itself (RMSNorm's
// out_fp8) calls forward_quantized and skips the separate quantization pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"
#include "quant/fp8_channel_layout.h"

namespace pagoda::kernels {

/// Which product forward() and forward_quantized() run. kAuto: the skinny kernel for
/// m <= kFp8SkinnyGemmMaxRows, cuBLASLt above. kSkinny and kCublasLt force one, for tests and
/// benchmarks (kSkinny above the bound is INVALID_ARGUMENT). Both scale, add the bias and round
/// alike; they differ in how the tensor cores sum the codes' products (tests/gpu/fp8_gemm_test.cc
/// holds both to one bound).
enum class Fp8GemmPath { kAuto, kSkinny, kCublasLt };

class Fp8Linear {
 public:
  /// Copies `m` to the device (synchronously: done once at load). Act-order permutations are not
  /// part of FP8 checkpoints and are refused.
  /// `sums_chunk_bytes` bounds the fp32 sums of one row chunk (tests make it small).
  static StatusOr<Fp8Linear> upload(const quant::Fp8ChannelMatrix& m,
                                    std::size_t sums_chunk_bytes = kSumsChunkBytes);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::size_t device_bytes() const { return codes_.bytes() + scales_.bytes(); }

  /// Scratch forward() needs for `m` rows: the activations' codes and scales, and the fp32 sums
  /// of one row chunk (at most the upload's sums_chunk_bytes). The same for either path, so a
  /// path forced after sizing still fits; the skinny kernel leaves the sums unused.
  std::size_t scratch_bytes(std::int64_t m) const;

  /// Scratch forward_quantized() needs for `m` rows: the fp32 sums of one row chunk.
  std::size_t sums_scratch_bytes(std::int64_t m) const;

  /// The fp32 sums of one chunk of rows stay within this (a prefill of 8k tokens through a
  /// 28k-channel gate/up layer would otherwise need 0.9 GB): whole multiples of 128 rows.
  static constexpr std::size_t kSumsChunkBytes = std::size_t{256} << 20;

  /// y [m, rows] = x [m, cols] W^T (+ bias), x, bias and y in `dtype` (bf16 or f16): x is
  /// quantized per token into `scratch`, then multiplied. At m <= kFp8SkinnyGemmMaxRows (kAuto)
  /// nothing but kernel launches: capturable in a CUDA graph.
  Status forward(const void* x, std::int64_t m, const void* bias, void* y, cuda::ScalarType dtype,
                 cuda::BlasLt& blas, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                 Fp8GemmPath path = Fp8GemmPath::kAuto) const;

  /// The same from activations already quantized by the producer: codes [m, cols], scales [m];
  /// `scratch` holds sums_scratch_bytes(m) (the skinny kernel does not touch it).
  Status forward_quantized(const std::uint8_t* x_codes, const float* x_scales, std::int64_t m,
                           const void* bias, void* y, cuda::ScalarType dtype, cuda::BlasLt& blas,
                           void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                           Fp8GemmPath path = Fp8GemmPath::kAuto) const;

 private:
  Fp8Linear() = default;
  std::int64_t chunk_rows(std::int64_t m) const;

  cuda::DeviceBuffer codes_;
  cuda::DeviceBuffer scales_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::size_t sums_chunk_bytes_ = kSumsChunkBytes;
};

}  // namespace pagoda::kernels
