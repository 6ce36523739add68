// exp for 8 floats at once (AVX2 + FMA), within 2 ulp of expf over the range softmax and SiLU
// use. Include only from *_avx2.cc translation units (internal linkage, see weight_blocks_avx2.h).
#pragma once

#include <immintrin.h>

#include "backend/cpu/exp_constants.h"

namespace pagoda::cpu::avx2 {
namespace {

// The algorithm and its constants: exp_constants.h.
inline __m256 exp256(__m256 x) {
  namespace c = exp_constants;
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(c::kMinInput)), _mm256_set1_ps(c::kMaxInput));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(c::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2High), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Low), r);
  __m256 p = _mm256_set1_ps(c::kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c::kTaylor[i]));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

}  // namespace
}  // namespace pagoda::cpu::avx2
