// The W4A16 GEMM's oracle for tests/gpu/w4a16_gemm_test.cc (on a GPU, and on the CPU emulation
// as emulated_w4a16_gemm_test): random matrices in the GPU layout, their weights read back
// exactly, and the float64 product with the error bound the kernel's roundings allow.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "quant/w4a16_layout.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/quant/random_quant_blocks.h"

namespace pagoda::kernels::w4a16_testing {

using cuda::ScalarType;

struct Shape {
  std::int64_t n, k, group_size;
};

inline quant::W4A16Matrix random_matrix(std::mt19937_64& rng, const Shape& s) {
  const quant::QuantizedMatrix q = quant::testing::random_q4_z(rng, s.n, s.k, s.group_size, true);
  StatusOr<quant::W4A16Matrix> m = quant::repack_w4a16(q);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(*m);
}

// The weights as floats, [rows, cols], read back from the packed layout (exact).
inline std::vector<float> dense_weights(const quant::W4A16Matrix& w) {
  std::vector<float> dense(static_cast<std::size_t>(w.rows * w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t c = 0; c < w.cols; ++c) {
      dense[static_cast<std::size_t>(r * w.cols + c)] = quant::w4a16_weight(w, r, c);
    }
  }
  return dense;
}

// The GGUF form's min terms B mc, [rows, cols] (empty without them): the kernel sums the scaled
// codes and the min term apart, so the error bound takes both magnitudes.
inline std::vector<float> min_terms(const quant::W4A16Matrix& w) {
  if (w.mins.empty()) return {};
  std::vector<float> terms(static_cast<std::size_t>(w.rows * w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t c = 0; c < w.cols; ++c) {
      terms[static_cast<std::size_t>(r * w.cols + c)] = quant::w4a16_min_term(w, r, c);
    }
  }
  return terms;
}

inline void expect_matches_reference(const std::vector<float>& got, const std::vector<float>& x,
                                     const quant::W4A16Matrix& w, const std::vector<float>& dense,
                                     const std::vector<float>& bias, std::int64_t m,
                                     ScalarType type, const std::string& what,
                                     const std::vector<float>& mins = {}) {
  const double u_out = gpu_test::unit_roundoff(type);
  const double sum_eps = (static_cast<double>(w.cols) / 8 + 64) * 0x1p-24;
  int failures = 0;
  for (std::int64_t i = 0; i < m && failures < 5; ++i) {
    for (std::int64_t j = 0; j < w.rows && failures < 5; ++j) {
      double ref = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(j)];
      double magnitude = std::abs(ref);
      for (std::int64_t c = 0; c < w.cols; ++c) {
        const auto at = static_cast<std::size_t>(j * w.cols + c);
        const double xv = x[static_cast<std::size_t>(i * w.cols + c)];
        const double wv = dense[at];
        ref += xv * wv;
        const double b = mins.empty() ? 0.0 : mins[at];
        magnitude += std::abs(xv) * (std::abs(wv - b) + std::abs(b));
      }
      const double g = got[static_cast<std::size_t>(i * w.rows + j)];
      const double tol = u_out * std::abs(ref) + sum_eps * magnitude + 1e-30;
      if (!(std::abs(g - ref) <= tol)) {
        ADD_FAILURE() << what << ": y[" << i << ", " << j << "] = " << g << ", want " << ref
                      << " +- " << tol;
        ++failures;
      }
    }
  }
}

}  // namespace pagoda::kernels::w4a16_testing
