#include "models/cuda_linear_layer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/embedding/embedding.h"
#include "kernels/embedding/scaled_embedding.h"
#include "kernels/gemm/skinny_gemm.h"

namespace pagoda::models {

using cuda::ScalarType;

Status dense_linear(cuda::BlasLt& blas, const cuda::LinearGemm& g, cudaStream_t stream) {
  const kernels::SkinnyGemmParams skinny{.x = g.x,
                                         .w = g.w,
                                         .bias = g.bias,
                                         .y = g.y,
                                         .m = g.m,
                                         .n = g.n,
                                         .k = g.k,
                                         .dtype = g.input_type,
                                         .output_f32 = g.output_type == ScalarType::kF32};
  const bool output_ok = g.output_type == g.input_type || skinny.output_f32;
  if (output_ok && kernels::skinny_gemm_applies(skinny)) {
    return kernels::launch_skinny_gemm(skinny, stream);
  }
  return blas.linear(g, stream);
}

CudaLinearLayer CudaLinearLayer::dense(cuda::DeviceBuffer weight, std::int64_t rows,
                                       std::int64_t cols) {
  CudaLinearLayer layer;
  layer.impl_ = DenseLinearWeight{.weight = std::move(weight), .rows = rows, .cols = cols};
  return layer;
}

CudaLinearLayer CudaLinearLayer::w4a16(kernels::W4A16Linear layer) {
  CudaLinearLayer out;
  out.impl_ = std::move(layer);
  return out;
}

CudaLinearLayer CudaLinearLayer::fp8(kernels::Fp8Linear layer) {
  CudaLinearLayer out;
  out.impl_ = std::move(layer);
  return out;
}

DeviceLinearKind CudaLinearLayer::kind() const {
  if (const auto* w4 = std::get_if<kernels::W4A16Linear>(&impl_)) {
    return w4->wide_codes() ? DeviceLinearKind::kW8A16 : DeviceLinearKind::kW4A16;
  }
  if (std::holds_alternative<kernels::Fp8Linear>(impl_)) return DeviceLinearKind::kFp8;
  return DeviceLinearKind::kDense;
}

std::int64_t CudaLinearLayer::rows() const {
  return std::visit(
      [](const auto& l) -> std::int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(l)>, DenseLinearWeight>) {
          return l.rows;
        } else {
          return l.rows();
        }
      },
      impl_);
}

std::int64_t CudaLinearLayer::cols() const {
  return std::visit(
      [](const auto& l) -> std::int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(l)>, DenseLinearWeight>) {
          return l.cols;
        } else {
          return l.cols();
        }
      },
      impl_);
}

void* CudaLinearLayer::dense_weight() {
  DenseLinearWeight* d = std::get_if<DenseLinearWeight>(&impl_);
  return d != nullptr ? d->weight.data() : nullptr;
}

const void* CudaLinearLayer::dense_weight() const {
  const DenseLinearWeight* d = std::get_if<DenseLinearWeight>(&impl_);
  return d != nullptr ? d->weight.data() : nullptr;
}

std::size_t CudaLinearLayer::device_bytes() const {
  return std::visit(
      [](const auto& l) -> std::size_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(l)>, DenseLinearWeight>) {
          return l.weight.bytes();
        } else {
          return l.device_bytes();
        }
      },
      impl_);
}

// W4A16's scratch is not monotone in m (the split-K workspace below kW4A16KernelMaxRows, the
// dequantized weight above it) and FP8's grows with m: every m up to the kernel's limit, and
// the largest, cover both.
std::size_t CudaLinearLayer::max_scratch_bytes(std::int64_t max_rows, ScalarType dtype) const {
  const auto* w4 = std::get_if<kernels::W4A16Linear>(&impl_);
  const auto* f8 = std::get_if<kernels::Fp8Linear>(&impl_);
  if (w4 == nullptr && f8 == nullptr) return 0;
  const auto bytes_at = [&](std::int64_t m) {
    return w4 != nullptr ? w4->scratch_bytes(m, dtype) : f8->scratch_bytes(m);
  };
  std::size_t most = bytes_at(max_rows);
  for (std::int64_t m = 1; m <= std::min(max_rows, kernels::kW4A16KernelMaxRows); ++m) {
    most = std::max(most, bytes_at(m));
  }
  return most;
}

Status CudaLinearLayer::forward(const void* x, std::int64_t m, const void* bias, void* y,
                                ScalarType dtype, cuda::BlasLt& blas, LinearScratch scratch,
                                cudaStream_t stream, bool y_fp32) const {
  if (const auto* w4 = std::get_if<kernels::W4A16Linear>(&impl_)) {
    return w4->forward(x, m, bias, y, dtype, blas, scratch.data, scratch.bytes, stream, y_fp32);
  }
  if (const auto* f8 = std::get_if<kernels::Fp8Linear>(&impl_)) {
    if (y_fp32) return unimplemented("an FP8 linear layer writes 16-bit outputs only");
    return f8->forward(x, m, bias, y, dtype, blas, scratch.data, scratch.bytes, stream);
  }
  const auto& d = std::get<DenseLinearWeight>(impl_);
  return dense_linear(blas,
                      {.x = x,
                       .w = d.weight.data(),
                       .bias = bias,
                       .y = y,
                       .m = m,
                       .n = d.rows,
                       .k = d.cols,
                       .input_type = dtype,
                       .output_type = y_fp32 ? ScalarType::kF32 : dtype},
                      stream);
}

Status CudaLinearLayer::forward_fp8_codes(const std::uint8_t* x_codes, const float* x_scales,
                                          std::int64_t m, const void* bias, void* y,
                                          ScalarType dtype, cuda::BlasLt& blas,
                                          LinearScratch scratch, cudaStream_t stream) const {
  const auto* f8 = std::get_if<kernels::Fp8Linear>(&impl_);
  if (f8 == nullptr) return invalid_argument("forward_fp8_codes: not an FP8 layer");
  return f8->forward_quantized(x_codes, x_scales, m, bias, y, dtype, blas, scratch.data,
                               scratch.bytes, stream);
}

Status CudaLinearLayer::gather_rows(const std::int32_t* ids, std::int64_t n, float scale, void* out,
                                    ScalarType dtype, cudaStream_t stream) const {
  if (const auto* w4 = std::get_if<kernels::W4A16Linear>(&impl_)) {
    return kernels::launch_w4a16_gather_rows(w4->weights(), ids, n, scale, out, dtype, stream);
  }
  const auto* d = std::get_if<DenseLinearWeight>(&impl_);
  if (d == nullptr) return unimplemented("gather_rows: an FP8 table");
  const kernels::EmbeddingParams p{.table = d->weight.data(),
                                   .ids = ids,
                                   .out = out,
                                   .num_table_rows = d->rows,
                                   .num_tokens = n,
                                   .hidden = d->cols,
                                   .dtype = dtype};
  return scale == 1.0f ? kernels::launch_embedding(p, stream)
                       : kernels::launch_scaled_embedding(p, scale, stream);
}

}  // namespace pagoda::models
