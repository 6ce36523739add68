// How far a matmul kernel's output may lie from matmul_reference's (double sums), shared by the
// matmul tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/matmul_int16_avx512.h"

namespace pagoda::cpu::testing {

/// fp32 accumulation of K products: the error of a sum of K terms grows like sqrt(K) * eps *
/// (sum of |terms|) for random rounding (the worst case is K * eps). Q4_1's kernels fold
/// m * sum(x) in separately, so |m| * sum|x| joins the magnitude. 1e-6 * sqrt(K) is ~8 eps *
/// sqrt(K): loose enough for blocked sums, tight enough to catch a wrong element or scale.
inline float fp32_tolerance(const float* x, const float* w_row, std::int64_t k) {
  double magnitude = 0.0;
  float max_w = 0.0f;
  for (std::int64_t i = 0; i < k; ++i) max_w = std::max(max_w, std::fabs(w_row[i]));
  for (std::int64_t i = 0; i < k; ++i) {
    magnitude += std::fabs(x[i]) * (std::fabs(w_row[i]) + max_w);
  }
  return static_cast<float>(1e-6 * std::sqrt(static_cast<double>(k)) * magnitude + 1e-7);
}

/// What rounding x to int16 (matmul_int16_avx512.h) may add: each element moves by at most half
/// a step, amax / 65534 of its 32-column block, and multiplies |w|. The worst case, every
/// rounding in the same direction; a wrong pair, scale or block would exceed it.
inline float int16_rounding_bound(const float* x, const float* w_row, std::int64_t k) {
  double bound = 0.0;
  for (std::int64_t b = 0; b < k / avx512::kInt16Block; ++b) {
    const std::int64_t c0 = b * avx512::kInt16Block;
    float amax = 0.0f;
    double w_sum = 0.0;
    for (std::int64_t c = c0; c < c0 + avx512::kInt16Block; ++c) {
      amax = std::max(amax, std::fabs(x[c]));
      w_sum += std::fabs(w_row[c]);
    }
    bound += amax / 65534.0 * w_sum;
  }
  return static_cast<float>(bound);
}

}  // namespace pagoda::cpu::testing
