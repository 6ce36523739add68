// AVX-512 fp32 decoders for one 32-weight block of Q8_0, Q4_0 and Q4_1, shared by the fp32
// *_avx512.cc kernels (the int16 kernels' decoders are int16_blocks.h). Include only from
// translation units compiled with AVX-512 flags; everything here has internal linkage (see
// weight_blocks_avx2.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pagoda::cpu::avx512 {
namespace {

constexpr int kBlock = 32;

inline float load_half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);
}

// A block decodes to two 16-lane vectors of quants (elements 0-15, 16-31), a scale and a
// minimum: weight = scale * q + min.

struct Q8_0Block {
  static constexpr int kBytes = 34;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m512 q[2], float& scale, float& min) {
    scale = load_half(b);
    min = 0.0f;
    for (int i = 0; i < 2; ++i) {
      q[i] = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * i))));
    }
  }
};

// Byte j of qs holds element j in its low nibble and element j + 16 in its high nibble, so the
// two nibble planes widen straight to elements 0-15 and 16-31.
template <int kOffset>
inline void q4_quants(const std::uint8_t* qs, __m512 q[2]) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i offset = _mm_set1_epi8(kOffset);
  const __m128i low = _mm_sub_epi8(_mm_and_si128(packed, mask), offset);
  const __m128i high = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), offset);
  q[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(low));
  q[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(high));
}

struct Q4_0Block {
  static constexpr int kBytes = 18;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m512 q[2], float& scale, float& min) {
    scale = load_half(b);
    min = 0.0f;
    q4_quants<8>(b + 2, q);
  }
};

struct Q4_1Block {
  static constexpr int kBytes = 20;
  static constexpr bool kHasMin = true;
  static void decode(const std::uint8_t* b, __m512 q[2], float& scale, float& min) {
    scale = load_half(b);
    min = load_half(b + 2);
    q4_quants<0>(b + 4, q);
  }
};

// One block to fp32 with the reference's rounding: scale * q, then + min (two roundings, no
// FMA: the including translation units are built without FP contraction, as the reference is).
// A 4-bit block has only 16 distinct weights: scale * (q - kOffset) (+ min) for q = 0..15, each
// rounded as the reference rounds it. Computing that table once and gathering it with vpermps
// replaces two int-to-float conversions, a multiply and an add per block.
template <int kOffset, bool kHasMin>
inline void q4_decode_by_table(const std::uint8_t* qs, float scale, float min, float* dst) {
  const __m512 levels =
      _mm512_setr_ps(0 - kOffset, 1 - kOffset, 2 - kOffset, 3 - kOffset, 4 - kOffset, 5 - kOffset,
                     6 - kOffset, 7 - kOffset, 8 - kOffset, 9 - kOffset, 10 - kOffset, 11 - kOffset,
                     12 - kOffset, 13 - kOffset, 14 - kOffset, 15 - kOffset);
  __m512 table = _mm512_mul_ps(_mm512_set1_ps(scale), levels);
  if constexpr (kHasMin) table = _mm512_add_ps(table, _mm512_set1_ps(min));
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m512i low = _mm512_cvtepu8_epi32(_mm_and_si128(packed, mask));
  const __m512i high = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(packed, 4), mask));
  _mm512_storeu_ps(dst, _mm512_permutexvar_ps(low, table));
  _mm512_storeu_ps(dst + 16, _mm512_permutexvar_ps(high, table));
}

template <typename Block>
inline void decode_block(const std::uint8_t* b, float* dst /* [32] */) {
  if constexpr (std::is_same_v<Block, Q4_0Block>) {
    return q4_decode_by_table<8, false>(b + 2, load_half(b), 0.0f, dst);
  } else if constexpr (std::is_same_v<Block, Q4_1Block>) {
    return q4_decode_by_table<0, true>(b + 4, load_half(b), load_half(b + 2), dst);
  }
  __m512 q[2];
  float scale, min;
  Block::decode(b, q, scale, min);
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int i = 0; i < 2; ++i) {
    __m512 v = _mm512_mul_ps(scale_v, q[i]);
    if constexpr (Block::kHasMin) v = _mm512_add_ps(v, _mm512_set1_ps(min));
    _mm512_storeu_ps(dst + 16 * i, v);
  }
}

}  // namespace
}  // namespace pagoda::cpu::avx512
