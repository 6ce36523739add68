#include "kernels/gemm/w4a16_linear.h"

#include <string>
#include <utility>

#include "backend/cuda/cuda_status.h"

namespace pagoda::kernels {

namespace {

template <typename T>
StatusOr<cuda::DeviceBuffer> to_device(const std::vector<T>& host) {
  PAGODA_ASSIGN_OR_RETURN(
      cuda::DeviceBuffer buffer,
      cuda::DeviceBuffer::allocate(std::max<std::size_t>(host.size(), 1) * sizeof(T)));
  if (!host.empty()) {
    PAGODA_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return buffer;
}

// 256-byte alignment for each piece of scratch: what cuBLASLt and 16-byte loads want.
std::size_t aligned(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

StatusOr<W4A16Linear> W4A16Linear::upload(const quant::W4A16Matrix& m) {
  W4A16Linear layer;
  PAGODA_ASSIGN_OR_RETURN(layer.packed_, to_device(m.packed));
  PAGODA_ASSIGN_OR_RETURN(layer.scales_, to_device(m.scales));
  if (!m.input_permutation.empty()) {
    PAGODA_ASSIGN_OR_RETURN(layer.permutation_, to_device(m.input_permutation));
  }
  layer.view_ = {.packed = layer.packed_.as<std::uint32_t>(),
                 .scales = layer.scales_.as<std::uint16_t>(),
                 .rows = m.rows,
                 .cols = m.cols,
                 .group_size = m.group_size};
  if (!m.gguf_form()) {
    PAGODA_ASSIGN_OR_RETURN(layer.zeros_, to_device(m.zeros));
    layer.view_.zeros = layer.zeros_.as<std::uint8_t>();
    return layer;
  }
  PAGODA_ASSIGN_OR_RETURN(layer.scale_codes_, to_device(m.scale_codes));
  layer.view_.scale_codes = layer.scale_codes_.as<std::int8_t>();
  layer.view_.super_shift = m.super_shift;
  layer.view_.code_zero = m.code_zero;
  if (m.hi_bits > 0) {
    PAGODA_ASSIGN_OR_RETURN(layer.packed_hi_, to_device(m.packed_hi));
    layer.view_.packed_hi = layer.packed_hi_.as<std::uint32_t>();
    layer.view_.hi_bits = m.hi_bits;
  }
  if (!m.mins.empty()) {
    PAGODA_ASSIGN_OR_RETURN(layer.mins_, to_device(m.mins));
    PAGODA_ASSIGN_OR_RETURN(layer.min_codes_, to_device(m.min_codes));
    layer.view_.mins = layer.mins_.as<std::uint16_t>();
    layer.view_.min_codes = layer.min_codes_.as<std::int8_t>();
  }
  return layer;
}

std::size_t W4A16Linear::device_bytes() const {
  return packed_.bytes() + scales_.bytes() + zeros_.bytes() + packed_hi_.bytes() +
         scale_codes_.bytes() + mins_.bytes() + min_codes_.bytes() + permutation_.bytes();
}

std::size_t W4A16Linear::scratch_bytes(std::int64_t m, cuda::ScalarType dtype) const {
  const std::size_t element = cuda::scalar_type_size(dtype);
  const std::size_t gathered =
      permutation_.bytes() > 0 ? aligned(static_cast<std::size_t>(m * cols()) * element) : 0;
  const std::size_t path = m <= kW4A16KernelMaxRows
                               ? aligned(w4a16_gemm_workspace_bytes(m, rows(), cols()))
                               : aligned(static_cast<std::size_t>(rows() * cols()) * element);
  return gathered + path;
}

Status W4A16Linear::forward(const void* x, std::int64_t m, const void* bias, void* y,
                            cuda::ScalarType dtype, cuda::BlasLt& blas, void* scratch,
                            std::size_t scratch_bytes_given, cudaStream_t stream,
                            bool y_fp32) const {
  if (m <= 0) return Status::ok_status();
  if (scratch_bytes_given < scratch_bytes(m, dtype)) {
    return invalid_argument("w4a16 linear: " + std::to_string(scratch_bytes_given) +
                            " bytes of scratch for m " + std::to_string(m) + ", needs " +
                            std::to_string(scratch_bytes(m, dtype)));
  }
  auto* next = static_cast<std::uint8_t*>(scratch);
  if (permutation_.bytes() > 0) {
    PAGODA_RETURN_IF_ERROR(
        launch_gather_columns(x, m, cols(), permutation_.as<std::int32_t>(), next, dtype, stream));
    x = next;
    next += aligned(static_cast<std::size_t>(m * cols()) * cuda::scalar_type_size(dtype));
  }
  if (m <= kW4A16KernelMaxRows) {
    // No counters: the K splits are added by the reduction kernel. The in-kernel reduction (the
    // last CTA of each tile) measured no faster at 1-16 rows and up to 2x slower at 64 (run 24,
    // H200: its last CTAs add the splits serially at the grid's tail).
    return launch_w4a16_gemm({.x = x,
                              .w = view_,
                              .bias = bias,
                              .y = y,
                              .y_fp32 = y_fp32,
                              .m = m,
                              .dtype = dtype,
                              .workspace = reinterpret_cast<float*>(next),
                              .workspace_bytes = w4a16_gemm_workspace_bytes(m, rows(), cols())},
                             stream);
  }
  PAGODA_RETURN_IF_ERROR(launch_w4a16_dequantize(view_, next, dtype, stream));
  return blas.linear({.x = x,
                      .w = next,
                      .bias = bias,
                      .y = y,
                      .m = m,
                      .n = rows(),
                      .k = cols(),
                      .input_type = dtype,
                      .output_type = y_fp32 ? cuda::ScalarType::kF32 : dtype},
                     stream);
}

}  // namespace pagoda::kernels
