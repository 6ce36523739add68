// exp for 16 floats at once (AVX-512F), the same polynomial and range reduction as exp256 in
// exp_avx2.h (within 2 ulp of expf over the range softmax uses). Include only from *_avx512.cc
// translation units (internal linkage, see weight_blocks_avx2.h).
#pragma once

#include <immintrin.h>

namespace pagoda::cpu::avx512 {
namespace {

// e^x = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in an exact high part and
// a low remainder), e^r from its Taylor series to r^7. Inputs are clamped to where 2^n is a
// normal float: below, the result is 2^-126 instead of 0 (callers mask what must be exactly 0).
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i exponent =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

}  // namespace
}  // namespace pagoda::cpu::avx512
