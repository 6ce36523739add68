#include "backend/cpu/quant_blocks_avx2.h"

#include <immintrin.h>

#include <cstring>
#include <limits>

#include "backend/cpu/weight_blocks_avx2.h"

namespace pagoda::cpu::quant_avx2 {

namespace {

constexpr int kBlock = 32;

// Q4_Z: fp16 d | u8 z | 16 nibble bytes; x = d * (q - z), exact in fp32.
void decode_q4_z(const std::uint8_t* src, std::int64_t count, float* dst) {
  for (std::int64_t b = 0; b < count / kBlock; ++b) {
    const std::uint8_t* block = src + b * 19;
    const __m256 d = _mm256_set1_ps(avx2::load_half(block));
    const __m256i z = _mm256_set1_epi32(block[2]);
    __m256i q[4];
    avx2::q4_quants(block + 3, q);
    for (int i = 0; i < 4; ++i) {
      const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(q[i], z));
      _mm256_storeu_ps(dst + b * kBlock + 8 * i, _mm256_mul_ps(d, v));
    }
  }
}

// Eight E4M3 codes to floats with integer ops, no table: a gather costs tens of cycles on CPUs
// with the gather-data-sampling mitigation. Normal codes (exponent e > 0) move their exponent
// and mantissa into fp32's fields with the bias changed from 7 to 127; subnormal codes
// (e = 0) are m * 2^-9, exact from an int conversion; S.1111.111 is NaN.
inline __m256 e4m3_to_float(__m128i eight_codes) {
  const __m256i codes = _mm256_cvtepu8_epi32(eight_codes);
  const __m256i magnitude = _mm256_and_si256(codes, _mm256_set1_epi32(0x7F));
  const __m256i normal =
      _mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), _mm256_set1_epi32((127 - 7) << 23));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(0x1p-9f));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), magnitude);
  __m256 value =
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), subnormal, _mm256_castsi256_ps(is_subnormal));
  const __m256i is_nan = _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7F));
  value = _mm256_blendv_ps(value, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()),
                           _mm256_castsi256_ps(is_nan));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x80)), 24);
  return _mm256_or_ps(value, _mm256_castsi256_ps(sign));
}

// F8_S: fp32 s | 32 E4M3 codes; x = s * f.
void decode_f8_s(const std::uint8_t* src, std::int64_t count, float* dst) {
  for (std::int64_t b = 0; b < count / kBlock; ++b) {
    const std::uint8_t* block = src + b * 36;
    float s;
    std::memcpy(&s, block, sizeof(s));
    const __m256 scale = _mm256_set1_ps(s);
    for (int i = 0; i < 4; ++i) {
      const __m256 f =
          e4m3_to_float(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 4 + 8 * i)));
      _mm256_storeu_ps(dst + b * kBlock + 8 * i, _mm256_mul_ps(scale, f));
    }
  }
}

}  // namespace

void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst) {
  if (dtype == DType::kQ4_Z) return decode_q4_z(src, count, dst);
  decode_f8_s(src, count, dst);
}

}  // namespace pagoda::cpu::quant_avx2
