// One linear layer of the CUDA executor in the form its weights allow (device_linear_plan.h
// picks it on the host): dense in the activation dtype (cuBLASLt, or the skinny kernel for
// decode-sized products), 4-bit W4A16 (8-bit W8A16 for GGUF types), or FP8 W8A8. CudaDecoderOps
// calls forward() whatever the form; quantized forms use the executor's one scratch buffer, sized
// at load from max_scratch_bytes for the token budget, so nothing is allocated during a step (or
// inside a captured decode graph).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <variant>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "kernels/gemm/fp8_linear.h"
#include "kernels/gemm/w4a16_linear.h"
#include "models/device_linear_plan.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// A dense product: decode-sized ones (m <= 4 rows, 16-bit) through the skinny kernel, which
/// streams the weight faster than cuBLASLt there (docs/perf/gpu.md, G5); the rest, and FP32,
/// through cuBLASLt.
Status dense_linear(cuda::BlasLt& blas, const cuda::LinearGemm& g, cudaStream_t stream);

/// Device memory a quantized layer's forward() may use as scratch. The executor's layers run one
/// after another on one stream, so they share one.
struct LinearScratch {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// A dense [rows, cols] row-major matrix in the activation dtype.
struct DenseLinearWeight {
  cuda::DeviceBuffer weight;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

class CudaLinearLayer {
 public:
  /// No weight (a dense layer of 0 x 0).
  CudaLinearLayer() = default;
  /// A [rows, cols] row-major matrix in the activation dtype.
  static CudaLinearLayer dense(cuda::DeviceBuffer weight, std::int64_t rows, std::int64_t cols);
  static CudaLinearLayer w4a16(kernels::W4A16Linear layer);
  static CudaLinearLayer fp8(kernels::Fp8Linear layer);

  DeviceLinearKind kind() const;
  std::int64_t rows() const;
  std::int64_t cols() const;
  /// The dense matrix (dummy weights fill it in place); nullptr for the quantized forms.
  void* dense_weight();
  const void* dense_weight() const;
  /// Device bytes the weight holds.
  std::size_t device_bytes() const;
  /// The most scratch forward() needs for any m in [1, max_rows] in `dtype` (0 when dense).
  std::size_t max_scratch_bytes(std::int64_t max_rows, cuda::ScalarType dtype) const;

  /// y [m, rows] = x [m, cols] W^T (+ bias [rows]), x, bias and y in `dtype`, on `stream`;
  /// launches only (capturable in a CUDA graph once cuBLASLt has planned the shape). With
  /// y_fp32, y is fp32 and unrounded (the LM head's logits; dense and W4A16 forms only).
  Status forward(const void* x, std::int64_t m, const void* bias, void* y, cuda::ScalarType dtype,
                 cuda::BlasLt& blas, LinearScratch scratch, cudaStream_t stream,
                 bool y_fp32 = false) const;

  /// The same product from activations a producer already quantized for an FP8 layer (RMSNorm's
  /// or the gated activation's fused FP8 output): codes [m, cols] and per-token scales, the bits
  /// forward() would make from x itself. FP8 form only.
  Status forward_fp8_codes(const std::uint8_t* x_codes, const float* x_scales, std::int64_t m,
                           const void* bias, void* y, cuda::ScalarType dtype, cuda::BlasLt& blas,
                           LinearScratch scratch, cudaStream_t stream) const;

  /// out [n, cols] = rows ids[0 .. n) of W in `dtype` (times `scale`, in fp32 and rounded once,
  /// unless it is 1): the embedding lookup of a token table held as a linear layer's weight,
  /// dense or in the W4A16 form (dequantized per lookup, so the table stays its file's size).
  /// Ids out of range give zero rows.
  Status gather_rows(const std::int32_t* ids, std::int64_t n, float scale, void* out,
                     cuda::ScalarType dtype, cudaStream_t stream) const;

 private:
  std::variant<DenseLinearWeight, kernels::W4A16Linear, kernels::Fp8Linear> impl_;
};

}  // namespace pagoda::models
