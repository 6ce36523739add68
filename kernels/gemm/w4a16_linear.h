// A W4A16 linear layer on the device (GPTQ / AWQ / int4 RTN / GGUF Q4_0 weights kept 4-bit, and
// the other GGUF types in the GGUF form, 4- or 8-bit): the tiles, scales and zeros (or codes and
// mins) of one quant::W4A16Matrix and its act-order permutation, and the
// choice per call between the in-register kernel (w4a16_gemm.h) for few rows of x and
// dequantize + cuBLASLt for many, where the tensor cores' full tiles win (../shared/GPU.md 4.3).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "kernels/gemm/w4a16_gemm.h"
#include "pagoda/status.h"
#include "quant/w4a16_layout.h"

namespace pagoda::kernels {

/// Rows of x up to which the in-register kernel runs; above, dequantize + cuBLASLt. Measured on
/// an H200 (gpu_bench kernels w4a16, run 19, docs/perf/gpu.md): the kernel is 2-3x faster than
/// dequantize + cuBLASLt at 64 and 128 rows on Llama-3-8B's shapes and even at 256.
inline constexpr std::int64_t kW4A16KernelMaxRows = 256;

class W4A16Linear {
 public:
  /// Copies `m` to the device (synchronously: done once at load).
  static StatusOr<W4A16Linear> upload(const quant::W4A16Matrix& m);

  std::int64_t rows() const { return view_.rows; }
  std::int64_t cols() const { return view_.cols; }
  const W4A16Weights& weights() const { return view_; }
  /// Codes of 5 to 8 bits (W8A16: GGUF Q5_0, Q5_1, Q8_0, Q5_K, Q6_K, mixed stacks).
  bool wide_codes() const { return view_.hi_bits > 0; }
  /// Device bytes the layer holds (what a 4-bit checkpoint costs on the GPU).
  std::size_t device_bytes() const;

  /// Scratch forward() needs for `m` rows of x in `dtype`: the gathered x under act-order, plus
  /// the kernel's split-K workspace or, past kW4A16KernelMaxRows, the dequantized weight.
  std::size_t scratch_bytes(std::int64_t m, cuda::ScalarType dtype) const;

  /// y [m, rows] = x [m, cols] W^T (+ bias [rows]), all in `dtype` (bf16 or f16), on `stream`;
  /// `scratch` holds at least scratch_bytes(m, dtype). With y_fp32, y is fp32 and unrounded
  /// (an LM head's logits), and past kW4A16KernelMaxRows rows cuBLASLt refuses a bias.
  Status forward(const void* x, std::int64_t m, const void* bias, void* y, cuda::ScalarType dtype,
                 cuda::BlasLt& blas, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                 bool y_fp32 = false) const;

 private:
  W4A16Linear() = default;

  cuda::DeviceBuffer packed_;
  cuda::DeviceBuffer scales_;
  cuda::DeviceBuffer zeros_;
  cuda::DeviceBuffer packed_hi_;  // the GGUF form's arrays, empty in the zero-point form
  cuda::DeviceBuffer scale_codes_;
  cuda::DeviceBuffer mins_;
  cuda::DeviceBuffer min_codes_;
  cuda::DeviceBuffer permutation_;  // empty without act-order
  W4A16Weights view_;
};

}  // namespace pagoda::kernels
