// The W4A16 dequantizer's and gathers' oracles (kernels/gemm/w4a16_dequantize.cu) for
// tests/gpu/w4a16_gemm_test.cc (on a GPU, and on the CPU emulation as emulated_w4a16_gemm_test).
// The dequantized weights themselves are w4a16_testing::dense_weights (tests/gpu/w4a16_reference.h)
// rounded once to the dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "quant/w4a16_layout.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::kernels::w4a16_testing {

// launch_w4a16_gather_rows' [ids, cols] output: rows `ids` of the exact weights `dense` [rows,
// cols], rounded to `type`, then times `scale` in fp32 and rounded again unless it is 1; ids out
// of range give zero rows.
inline std::vector<float> gathered_rows(const std::vector<float>& dense, std::int64_t rows,
                                        std::int64_t cols, const std::vector<std::int32_t>& ids,
                                        float scale, cuda::ScalarType type) {
  std::vector<float> out;
  out.reserve(ids.size() * static_cast<std::size_t>(cols));
  for (const std::int32_t id : ids) {
    std::vector<float> row(static_cast<std::size_t>(cols), 0.0f);
    if (id >= 0 && id < rows) {
      const auto first = dense.begin() + static_cast<std::ptrdiff_t>(id * cols);
      row = gpu_test::round_to(std::vector<float>(first, first + cols), type);
      if (scale != 1.0f) {
        for (float& v : row) v *= scale;  // fp32, as the kernel
        row = gpu_test::round_to(row, type);
      }
    }
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// A permutation of k columns (k not a multiple of 37) with no structure a wrong index would
// still match.
inline std::vector<std::int32_t> column_permutation(std::int64_t k) {
  std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) {
    perm[static_cast<std::size_t>(j)] = static_cast<std::int32_t>((j * 37 + 11) % k);
  }
  return perm;
}

// launch_gather_columns' [m, k] output: out[i, j] = x[i, perm[j]].
inline std::vector<float> gathered_columns(const std::vector<float>& x, std::int64_t m,
                                           std::int64_t k, const std::vector<std::int32_t>& perm) {
  std::vector<float> out(static_cast<std::size_t>(m * k));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      out[static_cast<std::size_t>(i * k + j)] =
          x[static_cast<std::size_t>(i * k + perm[static_cast<std::size_t>(j)])];
    }
  }
  return out;
}

/// The tile layout's padding rows (rows .. padded_rows - 1) given NaN scales and mins: an output
/// that reads one (a row past the matrix taken for a real one) is NaN, not a plausible zero.
inline quant::W4A16Matrix with_poisoned_padding(quant::W4A16Matrix w) {
  constexpr std::uint16_t kNaN = 0x7E00;
  const auto padded = static_cast<std::size_t>(w.padded_rows());
  for (std::vector<std::uint16_t>* v : {&w.scales, &w.mins}) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (static_cast<std::int64_t>(i % padded) >= w.rows) (*v)[i] = kNaN;
    }
  }
  return w;
}

}  // namespace pagoda::kernels::w4a16_testing
