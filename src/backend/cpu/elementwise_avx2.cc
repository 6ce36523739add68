#include "backend/cpu/elementwise_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/weight_blocks_avx2.h"

namespace pagoda::cpu::avx2 {

float sum_squares(const float* x, std::int64_t n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  float sum = horizontal_sum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

void scale_by_weight(const float* x, float scale, const float* weight, std::int64_t n, float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 normed = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(weight + i), normed));
  }
  for (; i < n; ++i) out[i] = weight[i] * (x[i] * scale);
}

void silu_mul(const float* gate, const float* up, std::int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 denom = _mm256_add_ps(one, exp256(_mm256_xor_ps(g, sign)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, denom), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

float exp_shifted(float* x, std::int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  const __m256 minus_infinity = _mm256_set1_ps(-INFINITY);
  __m256 acc = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // exp256 clamps its input, so masked (-inf) logits are zeroed explicitly.
    const __m256 e =
        _mm256_andnot_ps(_mm256_cmp_ps(v, minus_infinity, _CMP_EQ_OQ), exp256(_mm256_sub_ps(v, s)));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = horizontal_sum(acc);
  for (; i < n; ++i) {
    x[i] = expf(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

float max_value(const float* x, std::int64_t n) {
  // Two accumulators: the max chain's latency, not the loads, bounds one (max is exact in any
  // order, so the result does not change).
  __m256 m = _mm256_set1_ps(-INFINITY);
  __m256 m1 = m;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  m = _mm256_max_ps(m, m1);
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float best = _mm_cvtss_f32(h);
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

}  // namespace pagoda::cpu::avx2
