#include "kernels/gemm/fp8_linear.h"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/gemm/fp8_scale_epilogue.h"
#include "kernels/gemm/fp8_skinny_gemm.h"
#include "kernels/quant/fp8_quantize.h"

namespace pagoda::kernels {

namespace {

std::size_t aligned(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

StatusOr<Fp8Linear> Fp8Linear::upload(const quant::Fp8ChannelMatrix& m,
                                      std::size_t sums_chunk_bytes) {
  if (!m.input_permutation.empty()) {
    return unimplemented("FP8 weights with an input permutation");
  }
  if (m.cols % 16 != 0) {
    return invalid_argument("FP8 weights need a multiple of 16 columns, not " +
                            std::to_string(m.cols));
  }
  Fp8Linear layer;
  layer.rows_ = m.rows;
  layer.cols_ = m.cols;
  layer.sums_chunk_bytes_ = sums_chunk_bytes;
  PAGODA_ASSIGN_OR_RETURN(layer.codes_, cuda::DeviceBuffer::allocate(m.codes.size()));
  PAGODA_ASSIGN_OR_RETURN(layer.scales_,
                          cuda::DeviceBuffer::allocate(m.scales.size() * sizeof(float)));
  PAGODA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(layer.codes_.data(), m.codes.data(), m.codes.size(), cudaMemcpyHostToDevice));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpy(layer.scales_.data(), m.scales.data(),
                                         m.scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  return layer;
}

std::int64_t Fp8Linear::chunk_rows(std::int64_t m) const {
  const auto fit = static_cast<std::int64_t>(sums_chunk_bytes_ / (sizeof(float) * rows_));
  const std::int64_t rows = fit >= 128 ? fit / 128 * 128 : std::max<std::int64_t>(fit, 1);
  return std::min(m, rows);
}

std::size_t Fp8Linear::sums_scratch_bytes(std::int64_t m) const {
  return aligned(static_cast<std::size_t>(chunk_rows(m) * rows_) * sizeof(float));
}

std::size_t Fp8Linear::scratch_bytes(std::int64_t m) const {
  return aligned(static_cast<std::size_t>(m * cols_)) +
         aligned(static_cast<std::size_t>(m) * sizeof(float)) + sums_scratch_bytes(m);
}

Status Fp8Linear::forward(const void* x, std::int64_t m, const void* bias, void* y,
                          cuda::ScalarType dtype, cuda::BlasLt& blas, void* scratch,
                          std::size_t scratch_bytes_given, cudaStream_t stream,
                          Fp8GemmPath path) const {
  if (m <= 0) return Status::ok_status();
  if (scratch_bytes_given < scratch_bytes(m)) {
    return invalid_argument("fp8 linear: " + std::to_string(scratch_bytes_given) +
                            " bytes of scratch for m " + std::to_string(m));
  }
  auto* codes = static_cast<std::uint8_t*>(scratch);
  const std::size_t codes_bytes = aligned(static_cast<std::size_t>(m * cols_));
  const std::size_t scales_bytes = aligned(static_cast<std::size_t>(m) * sizeof(float));
  auto* scales = reinterpret_cast<float*>(codes + codes_bytes);
  PAGODA_RETURN_IF_ERROR(launch_fp8_quantize_rows(
      {.x = x, .codes = codes, .scales = scales, .rows = m, .cols = cols_, .dtype = dtype},
      stream));
  return forward_quantized(codes, scales, m, bias, y, dtype, blas,
                           codes + codes_bytes + scales_bytes,
                           scratch_bytes_given - codes_bytes - scales_bytes, stream, path);
}

Status Fp8Linear::forward_quantized(const std::uint8_t* x_codes, const float* x_scales,
                                    std::int64_t m, const void* bias, void* y,
                                    cuda::ScalarType dtype, cuda::BlasLt& blas, void* scratch,
                                    std::size_t scratch_bytes_given, cudaStream_t stream,
                                    Fp8GemmPath path) const {
  if (m <= 0) return Status::ok_status();
  if (path == Fp8GemmPath::kSkinny || (path == Fp8GemmPath::kAuto && m <= kFp8SkinnyGemmMaxRows)) {
    return launch_fp8_skinny_gemm({.x = x_codes,
                                   .x_scales = x_scales,
                                   .w = codes_.as<std::uint8_t>(),
                                   .w_scales = scales_.as<float>(),
                                   .bias = bias,
                                   .y = y,
                                   .m = m,
                                   .n = rows_,
                                   .k = cols_,
                                   .dtype = dtype},
                                  stream);
  }
  if (!blas.fp8_linear_supported()) {
    if (scratch_bytes_given < sums_scratch_bytes(m)) {
      return invalid_argument("fp8 linear: " + std::to_string(scratch_bytes_given) +
                              " bytes of sums scratch for m " + std::to_string(m));
    }
    auto* sums = static_cast<float*>(scratch);
    const std::int64_t chunk = chunk_rows(m);
    const std::size_t out_bytes = 2;  // bf16 or f16
    for (std::int64_t row = 0; row < m; row += chunk) {
      const std::int64_t rows = std::min(chunk, m - row);
      PAGODA_RETURN_IF_ERROR(blas.linear_fp8_sums({.x = x_codes + row * cols_,
                                                   .w = codes_.data(),
                                                   .sums = sums,
                                                   .m = rows,
                                                   .n = rows_,
                                                   .k = cols_},
                                                  stream));
      PAGODA_RETURN_IF_ERROR(launch_fp8_scale_epilogue(
          {.sums = sums,
           .x_scales = x_scales + row,
           .w_scales = scales_.as<float>(),
           .bias = bias,
           .y = static_cast<char*>(y) + static_cast<std::size_t>(row * rows_) * out_bytes,
           .m = rows,
           .n = rows_,
           .dtype = dtype},
          stream));
    }
    return Status::ok_status();
  }
  return blas.linear_fp8({.x = x_codes,
                          .x_scales = x_scales,
                          .w = codes_.data(),
                          .w_scales = scales_.as<float>(),
                          .bias = bias,
                          .y = y,
                          .m = m,
                          .n = rows_,
                          .k = cols_,
                          .output_type = dtype},
                         stream);
}

}  // namespace pagoda::kernels
