#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/gelu_tanh.h"

namespace pagoda::cpu::avx2 {

// 0.5 g (1 + tanh(u)) = g * sigmoid(2u) = g / (1 + exp(-2u)): one exp, no tanh. exp256 clamps
// its input, so a very negative g gives g / (1 + e^88) ~ -0 and a very positive one g.
void gelu_tanh_mul(const float* gate, const float* up, std::int64_t n, float* out) {
  constexpr float kMinusTwoSqrt2OverPi = -1.5957691216057308f;
  constexpr float kCubic = 0.044715f;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 k2 = _mm256_set1_ps(kMinusTwoSqrt2OverPi);
  const __m256 kc = _mm256_set1_ps(kCubic);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 inner = _mm256_fmadd_ps(kc, g3, g);
    const __m256 denom = _mm256_add_ps(one, exp256(_mm256_mul_ps(k2, inner)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, denom), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(kMinusTwoSqrt2OverPi * (g + kCubic * g * g * g))) * up[i];
  }
}

}  // namespace pagoda::cpu::avx2
