// exp for 16 floats at once (AVX-512F), the same polynomial and range reduction as exp256 in
// exp_avx2.h (within 2 ulp of expf over the range softmax uses). Include only from *_avx512.cc
// translation units (internal linkage, see weight_blocks_avx2.h).
#pragma once

#include <immintrin.h>

#include "backend/cpu/exp_constants.h"

namespace pagoda::cpu::avx512 {
namespace {

// The algorithm and its constants: exp_constants.h.
inline __m512 exp512(__m512 x) {
  namespace c = exp_constants;
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(c::kMinInput)), _mm512_set1_ps(c::kMaxInput));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(c::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2High), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Low), r);
  __m512 p = _mm512_set1_ps(c::kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c::kTaylor[i]));
  const __m512i exponent =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

}  // namespace
}  // namespace pagoda::cpu::avx512
