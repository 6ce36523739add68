// A non-owning view of a 2-D stored tensor, typically a weight used in place from a memory-mapped
// model file: rows may start at any byte address, so kernels read them with unaligned loads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu {

/// Rows of `num_cols` elements of `dtype`, `row_stride` bytes apart.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t num_rows = 0;
  std::int64_t num_cols = 0;
  std::size_t row_stride = 0;  ///< Bytes from one row to the next.
  /// [num_cols] or nullptr: stored column j multiplies input channel input_permutation[j]
  /// (GPTQ act-order; see input_permutation.h). Matmul honours it; row decoding ignores it.
  const std::int32_t* input_permutation = nullptr;
  /// Rows stored 16 at a time in interleaved panels (interleaved_rows.h): row() and row-major
  /// kernels do not apply; row_stride is still one row's bytes.
  bool interleaved = false;

  /// The first byte of row `i` of a row-major view.
  const std::uint8_t* row(std::int64_t i) const {
    return static_cast<const std::uint8_t*>(data) + static_cast<std::size_t>(i) * row_stride;
  }
};

/// A view of a dense row-major [num_rows, num_cols] tensor of `dtype` at `data`.
TensorView dense_view(const void* data, DType dtype, std::int64_t num_rows, std::int64_t num_cols);

}  // namespace pagoda::cpu
