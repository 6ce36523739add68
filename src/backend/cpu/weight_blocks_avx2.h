// AVX2 decoders for one 32-weight block of each stored type, shared by the *_avx2.cc kernels.
// Include only from translation units compiled with -mavx2 -mfma -mf16c; everything here has
// internal linkage so no AVX2 code can leak into baseline callers through the linker.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace pagoda::cpu::avx2 {
namespace {

inline float load_half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);
}

inline __m256 bytes_to_float(__m128i eight_signed_bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight_signed_bytes));
}

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A block decodes to four vectors of quants `q` (elements 0-7, 8-15, 16-23, 24-31 of the block),
// a scale and a minimum: weight = scale * q + min. Plain float types have scale 1 and min 0 and
// say so at compile time (kScaled, kHasMin) so kernels skip the work.

/// Q8_0: fp16 d | int8 q[32]; x = d * q.
struct Q8_0Block {
  static constexpr int kBytes = 34;
  static constexpr bool kScaled = true;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = load_half(b);
    min = 0.0f;
    for (int i = 0; i < 4; ++i) {
      q[i] = bytes_to_float(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * i)));
    }
  }
};

// Q4 nibble order: byte j holds element j (low nibble) and element j + 16 (high nibble).
//
//   qs byte:   [ 0 ][ 1 ] ... [15 ]
//   low  4b:     0    1  ...   15
//   high 4b:    16   17  ...   31
inline void split_nibbles(const std::uint8_t* qs, __m128i offset, __m128i& low, __m128i& high) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  low = _mm_sub_epi8(_mm_and_si128(packed, mask), offset);
  high = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), offset);
}

/// Q4_0: fp16 d | 16 bytes of nibbles; x = d * (q - 8).
struct Q4_0Block {
  static constexpr int kBytes = 18;
  static constexpr bool kScaled = true;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = load_half(b);
    min = 0.0f;
    __m128i low, high;
    split_nibbles(b + 2, _mm_set1_epi8(8), low, high);
    q[0] = bytes_to_float(low);
    q[1] = bytes_to_float(_mm_srli_si128(low, 8));
    q[2] = bytes_to_float(high);
    q[3] = bytes_to_float(_mm_srli_si128(high, 8));
  }
};

/// Q4_1: fp16 d | fp16 m | 16 bytes of nibbles; x = d * q + m.
struct Q4_1Block {
  static constexpr int kBytes = 20;
  static constexpr bool kScaled = true;
  static constexpr bool kHasMin = true;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = load_half(b);
    min = load_half(b + 2);
    __m128i low, high;
    split_nibbles(b + 4, _mm_setzero_si128(), low, high);
    q[0] = bytes_to_float(low);
    q[1] = bytes_to_float(_mm_srli_si128(low, 8));
    q[2] = bytes_to_float(high);
    q[3] = bytes_to_float(_mm_srli_si128(high, 8));
  }
};

/// 32 IEEE halves.
struct F16Block {
  static constexpr int kBytes = 64;
  static constexpr bool kScaled = false;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = 1.0f;
    min = 0.0f;
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * i)));
    }
  }
  static float element(const std::uint8_t* row, std::int64_t i) { return load_half(row + 2 * i); }
};

/// 32 bfloat16 values: the high halves of floats.
struct BF16Block {
  static constexpr int kBytes = 64;
  static constexpr bool kScaled = false;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = 1.0f;
    min = 0.0f;
    for (int i = 0; i < 4; ++i) {
      const __m256i wide =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * i)));
      q[i] = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
  }
  static float element(const std::uint8_t* row, std::int64_t i) {
    std::uint16_t bits;
    std::memcpy(&bits, row + 2 * i, sizeof(bits));
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
  }
};

/// 32 floats.
struct F32Block {
  static constexpr int kBytes = 128;
  static constexpr bool kScaled = false;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = 1.0f;
    min = 0.0f;
    for (int i = 0; i < 4; ++i) q[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(b) + 8 * i);
  }
  static float element(const std::uint8_t* row, std::int64_t i) {
    float value;
    std::memcpy(&value, row + 4 * i, sizeof(value));
    return value;
  }
};

}  // namespace
}  // namespace pagoda::cpu::avx2
