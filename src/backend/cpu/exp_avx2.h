// exp for 8 floats at once (AVX2 + FMA), within 2 ulp of expf over the range softmax and SiLU
// use. Include only from *_avx2.cc translation units (internal linkage, see weight_blocks_avx2.h).
#pragma once

#include <immintrin.h>

namespace pagoda::cpu::avx2 {
namespace {

// e^x = 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2) / 2; e^r from its Taylor series to
// r^7 (truncation error < 1e-8 relative at |r| = 0.347). ln 2 is split in a high part exact in
// float and a low remainder so r keeps full precision for large |x|. Inputs are clamped to the
// range where 2^n is a normal float: below, the result is 2^-126 instead of 0 or a subnormal.
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

}  // namespace
}  // namespace pagoda::cpu::avx2
