#include "backend/cpu/activation.h"

#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise_avx2.h"

namespace pagoda::cpu {

void silu_mul(const float* gate, const float* up, std::int64_t n, float* out) {
  if (cpu_has_avx2()) return avx2::silu_mul(gate, up, n, out);
  for (std::int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void silu_mul_reference(const float* gate, const float* up, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void softmax(float* x, std::int64_t num_rows, std::int64_t n) {
  for (std::int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * n;
    double sum = 0.0;
    if (cpu_has_avx2()) {
      sum = avx2::exp_shifted(row, n, avx2::max_value(row, n));
    } else {
      // A serial fp32 sum of a vocabulary's worth of terms would lose ~n * eps; double does not.
      float max = -INFINITY;
      for (std::int64_t i = 0; i < n; ++i) max = std::fmax(max, row[i]);
      for (std::int64_t i = 0; i < n; ++i) {
        row[i] = std::exp(row[i] - max);
        sum += row[i];
      }
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i) row[i] *= inv;
  }
}

void softmax_reference(float* x, std::int64_t num_rows, std::int64_t n) {
  for (std::int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * n;
    double max = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) max = std::fmax(max, static_cast<double>(row[i]));
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
    for (std::int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(std::exp(row[i] - max) / sum);
  }
}

void add_inplace(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace pagoda::cpu
