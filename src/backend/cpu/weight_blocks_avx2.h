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
//
// The 16 bytes are broadcast to both 128-bit lanes; one byte shuffle per 8 bytes then puts byte
// j alone in 32-bit lane j (lane 0 of the shuffle serves bytes 0-3, lane 1 bytes 4-7, as
// shuffles cannot cross lanes), so `& 15` and `>> 4` give elements in order with no widening.
inline void q4_quants(const std::uint8_t* qs, __m256i q[4]) {
  const __m256i bytes =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i first =
      _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1, 4, -1, -1, -1, 5,
                       -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1);
  // Same pattern for bytes 8-15 (no carry: every selected index stays below 16).
  const __m256i second = _mm256_add_epi32(first, _mm256_set1_epi32(8));
  const __m256i low_mask = _mm256_set1_epi32(0x0F);
  const __m256i a = _mm256_shuffle_epi8(bytes, first);
  const __m256i b = _mm256_shuffle_epi8(bytes, second);
  q[0] = _mm256_and_si256(a, low_mask);
  q[1] = _mm256_and_si256(b, low_mask);
  q[2] = _mm256_srli_epi32(a, 4);
  q[3] = _mm256_srli_epi32(b, 4);
}

/// Q4_0: fp16 d | 16 bytes of nibbles; x = d * (q - 8).
struct Q4_0Block {
  static constexpr int kBytes = 18;
  static constexpr bool kScaled = true;
  static constexpr bool kHasMin = false;
  static void decode(const std::uint8_t* b, __m256 q[4], float& scale, float& min) {
    scale = load_half(b);
    min = 0.0f;
    __m256i quants[4];
    q4_quants(b + 2, quants);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtepi32_ps(_mm256_sub_epi32(quants[i], eight));
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
    __m256i quants[4];
    q4_quants(b + 4, quants);
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtepi32_ps(quants[i]);
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
