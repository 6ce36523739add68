#include "backend/cpu/gelu_tanh.h"

#include <cmath>

#include "backend/cpu/cpu_features.h"

namespace pagoda::cpu {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

}  // namespace

void gelu_tanh_mul(const float* gate, const float* up, std::int64_t n, float* out) {
  if (cpu_has_avx2()) return avx2::gelu_tanh_mul(gate, up, n, out);
  constexpr auto k2 = static_cast<float>(2.0 * kSqrt2OverPi);
  constexpr auto kc = static_cast<float>(kCubic);
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-k2 * (g + kc * g * g * g))) * up[i];
  }
}

void gelu_tanh_mul_reference(const float* gate, const float* up, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double gelu = 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * (g + kCubic * g * g * g)));
    out[i] = static_cast<float>(gelu * up[i]);
  }
}

}  // namespace pagoda::cpu
