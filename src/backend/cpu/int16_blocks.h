// Block decoders of the int16-activation matmul kernels, for every type int16_decodes()
// (int16_types.h) names: AVX2, FMA and F16C intrinsics only, so that the AVX-512 kernels
// (matmul_int16_avx512.cc) and the AVX2 kernels (matmul_int16_avx2.cc) decode the same integers and
// scales. Include only from translation units compiled with at least -mavx2 -mfma -mf16c;
// everything here has internal linkage, so no AVX code can leak into baseline callers through the
// linker (weight_blocks_avx2.h).
//
// The contract (matmul_int16_avx512.h) sees a weight row as 32-column blocks b, each of S
// sub-blocks t (S = 2: columns 0-15 and 16-31) with integer quants qw and fp32 scale_t, min_t.
// A GGUF row stores groups of kGroupBlocks such blocks (1, or 8 for the 256-weight K-quants) in
// kGroupBytes each: block b is block j = b % kGroupBlocks of group b / kGroupBlocks. Per type,
// one struct:
//
//   kType, kSubBlocks (S), kHasMin, kGroupBlocks, kGroupBytes
//   quants(g, j)    block j of the group at g: its 32 qw as signed bytes, in column order
//   scales8(base, offsets, scale, min, stride)
//                   scale_t and min_t of every block j of 8 groups, lane l's at base + offsets[l]:
//                   scale[(j * kSubBlocks + t) * stride + l], min likewise (only if kHasMin)
//
// A kernel decodes a group's scales once for 8 (or, twice, 16) weight rows and each block's quants
// where it needs them. One-block groups (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) start with the fp16 scale,
// then (kHasMin) the fp16 min, so a kernel may also read those itself (one scalar load or one
// 16-lane gather instead of scales8 per block). with_int16_block(dtype, f) calls f(Block{}) with
// the type's struct: the one switch over types for every kernel.
//
// Pass quants() a constant j where the loop allows (the kernels' for_each_block): the shifts are
// then immediates, where a shift by a register count costs another shuffle-port uop (int16_direct
// 15-30% faster on K-quants). Only Q2_K has both two sub-blocks and mins, so only it needs x's
// sums per 16 columns.
//
// The K-quants' scale_t = d * (6- or 8-bit integer) and min_t = -(dmin * integer) are exact in
// fp32 (an fp16 mantissa times at most 8 bits), so any order of computing them gives the same bits.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "model/dtype.h"

namespace pagoda::cpu::int16 {
namespace {

// A 32-column block as int16 column pairs (the tiles' buffers hold a row's block as 16 int32).
inline constexpr int kInt16BlockPairs = 16;

inline float load_half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);
}

inline __m256i load_256(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 16 bytes of packed nibbles (byte c: column c low, column c + 16 high) as 32 bytes 0..15 in
// column order. The broadcast is a load; the rest avoids the shuffle port.
inline __m256i nibbles(const std::uint8_t* qs) {
  const __m256i x =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_blend_epi32(x, _mm256_srli_epi16(x, 4), 0xF0),
                          _mm256_set1_epi8(0x0F));
}

// Q5_0/Q5_1's fifth bits: bit c of qh as byte c, 0 or 16.
inline __m256i q5_high_bits(const std::uint8_t* p) {
  std::uint32_t qh;
  std::memcpy(&qh, p, sizeof(qh));
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(0x10));
}

// A field of `mask` bits at bit `shift` of every byte of 32 bytes (shift + width <= 8, so the
// 16-bit shift brings in nothing the mask keeps).
inline __m256i byte_field(__m256i x, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(x, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// A field of `mask` bits at bit `from` of every byte of 32 bytes, moved to bit `to` (the bits a
// 16-bit shift brings in from the neighbouring byte lie outside the mask).
inline __m256i byte_field_at(__m256i x, int from, int to, int mask) {
  const __m256i moved = from > to   ? _mm256_srli_epi16(x, from - to)
                        : from < to ? _mm256_slli_epi16(x, to - from)
                                    : x;
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(mask << to)));
}

// The 32-bit words at base + offsets[l].
inline __m256i gather(const std::uint8_t* base, __m256i offsets) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), offsets, 1);
}

// fp16 in the low (high) 16 bits of each 32-bit lane, as fp32.
inline __m256 low_halves(__m256i v) {
  const __m256i low = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(
      _mm_packus_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1)));
}
inline __m256 high_halves(__m256i v) {
  return low_halves(_mm256_srli_epi32(v, 16));
}

// Unsigned bits [shift, shift + width) of each 32-bit lane, as fp32.
inline __m256i lane_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi32(v, shift), _mm256_set1_epi32(mask));
}

inline __m256 times(__m256 d, __m256i integer) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(integer));
}
inline __m256 minus_times(__m256 d, __m256i integer) {
  return _mm256_xor_ps(times(d, integer), _mm256_set1_ps(-0.0f));
}

// Q8_0, Q4_0 and Q5_0: one fp16 scale first in the block, no min.
inline void scale_only(const std::uint8_t* base, __m256i offsets, float* scale) {
  _mm256_storeu_ps(scale, low_halves(gather(base, offsets)));
}

// Q4_1 and Q5_1: fp16 scale, then fp16 min.
inline void scale_and_min(const std::uint8_t* base, __m256i offsets, float* scale, float* min) {
  const __m256i header = gather(base, offsets);
  _mm256_storeu_ps(scale, low_halves(header));
  _mm256_storeu_ps(min, high_halves(header));
}

struct Q8_0Int16 {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kGroupBytes = 34;  // fp16 d | int8 q[32]
  static __m256i quants(const std::uint8_t* g, int /*j*/) { return load_256(g + 2); }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* /*min*/,
                      int /*stride*/) {
    scale_only(base, offsets, scale);
  }
};

struct Q4_0Int16 {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kGroupBytes = 18;  // fp16 d | nibbles[16], q = nibble - 8
  static __m256i quants(const std::uint8_t* g, int /*j*/) {
    return _mm256_sub_epi8(nibbles(g + 2), _mm256_set1_epi8(8));
  }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* /*min*/,
                      int /*stride*/) {
    scale_only(base, offsets, scale);
  }
};

struct Q4_1Int16 {
  static constexpr DType kType = DType::kQ4_1;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kGroupBytes = 20;  // fp16 d | fp16 m | nibbles[16]
  static __m256i quants(const std::uint8_t* g, int /*j*/) { return nibbles(g + 4); }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int /*stride*/) {
    scale_and_min(base, offsets, scale, min);
  }
};

struct Q5_0Int16 {
  static constexpr DType kType = DType::kQ5_0;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kGroupBytes = 22;  // fp16 d | u32 qh | nibbles[16], q = q5 - 16
  static __m256i quants(const std::uint8_t* g, int /*j*/) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(g + 6), q5_high_bits(g + 2)),
                           _mm256_set1_epi8(16));
  }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* /*min*/,
                      int /*stride*/) {
    scale_only(base, offsets, scale);
  }
};

struct Q5_1Int16 {
  static constexpr DType kType = DType::kQ5_1;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kGroupBytes = 24;  // fp16 d | fp16 m | u32 qh | nibbles[16]
  static __m256i quants(const std::uint8_t* g, int /*j*/) {
    return _mm256_or_si256(nibbles(g + 8), q5_high_bits(g + 4));
  }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int /*stride*/) {
    scale_and_min(base, offsets, scale, min);
  }
};

// Q4_K/Q5_K: fp16 d | fp16 dmin | 12 bytes of eight 6-bit (scale, min) pairs, one per block j:
//   j < 4:  scale = s[j] & 63,                          min = s[j + 4] & 63
//   j >= 4: scale = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,  min = (s[j + 4] >> 4) | (s[j] >> 6) <<
//   4
// scale_j = d * scale, min_j = -(dmin * min).
inline void k_scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int stride) {
  const __m256i header = gather(base, offsets);
  const __m256 d = low_halves(header);
  const __m256 dmin = high_halves(header);
  const __m256i s0 = gather(base + 4, offsets);   // s[0..3]
  const __m256i s1 = gather(base + 8, offsets);   // s[4..7]
  const __m256i s2 = gather(base + 12, offsets);  // s[8..11]
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(scale + j * stride, times(d, lane_bits(s0, 8 * j, 63)));
    _mm256_storeu_ps(min + j * stride, minus_times(dmin, lane_bits(s1, 8 * j, 63)));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i sc = _mm256_or_si256(lane_bits(s2, 8 * j, 15), lane_bits(s0, 8 * j + 2, 0x30));
    const __m256i m = _mm256_or_si256(lane_bits(s2, 8 * j + 4, 15), lane_bits(s1, 8 * j + 2, 0x30));
    _mm256_storeu_ps(scale + (4 + j) * stride, times(d, sc));
    _mm256_storeu_ps(min + (4 + j) * stride, minus_times(dmin, m));
  }
}

struct Q4_KInt16 {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kGroupBlocks = 8;
  static constexpr int kGroupBytes = 144;  // fp16 d | fp16 dmin | scales[12] | qs[128]
  // Bytes 32 (j / 2) .. + 31 of qs: block j in the low (even j) or high nibbles.
  static __m256i quants(const std::uint8_t* g, int j) {
    return byte_field(load_256(g + 16 + 32 * (j / 2)), 4 * (j % 2), 0x0F);
  }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int stride) {
    k_scales8(base, offsets, scale, min, stride);
  }
};

struct Q5_KInt16 {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kSubBlocks = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kGroupBlocks = 8;
  static constexpr int kGroupBytes = 176;  // fp16 d | fp16 dmin | scales[12] | qh[32] | qs[128]
  // Q4_K's nibbles, and bit j of qh[c] as 16.
  static __m256i quants(const std::uint8_t* g, int j) {
    const __m256i low = byte_field(load_256(g + 48 + 32 * (j / 2)), 4 * (j % 2), 0x0F);
    return _mm256_or_si256(low, byte_field_at(load_256(g + 16), j, 4, 1));
  }
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int stride) {
    k_scales8(base, offsets, scale, min, stride);
  }
};

struct Q6_KInt16 {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kSubBlocks = 2;
  static constexpr bool kHasMin = false;
  static constexpr int kGroupBlocks = 8;
  static constexpr int kGroupBytes = 210;  // ql[128] | qh[64] | int8 scales[16] | fp16 d
  // Blocks 4h..4h+3 (half h) take ql bytes 64h..64h+63, block j the 32-byte run j % 2 in its
  // low ((j % 4) / 2 = 0) or high nibbles, and qh bytes 32h..32h+31 at bit 2 (j % 4);
  // q = (low | high << 4) - 32.
  static __m256i quants(const std::uint8_t* g, int j) {
    const __m256i low =
        byte_field(load_256(g + 64 * (j / 4) + 32 * (j % 2)), 4 * ((j % 4) / 2), 0x0F);
    const __m256i high = byte_field_at(load_256(g + 128 + 32 * (j / 4)), 2 * (j % 4), 4, 3);
    return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
  }
  // scale_t of block j = d * scales[2 j + t]; d is read from the word ending the block.
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* /*min*/,
                      int stride) {
    const __m256 d = high_halves(gather(base + 206, offsets));
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const __m256i word = gather(base + 192 + 4 * w, offsets);
#pragma GCC unroll 4
      for (int byte = 0; byte < 4; ++byte) {
        const __m256i sc = _mm256_srai_epi32(_mm256_slli_epi32(word, 24 - 8 * byte), 24);
        _mm256_storeu_ps(scale + (4 * w + byte) * stride, times(d, sc));
      }
    }
  }
};

struct Q3_KInt16 {
  static constexpr DType kType = DType::kQ3_K;
  static constexpr int kSubBlocks = 2;
  static constexpr bool kHasMin = false;
  static constexpr int kGroupBlocks = 8;
  static constexpr int kGroupBytes = 110;  // hmask[32] | qs[64] | scales[12] | fp16 d
  // 2 bits from qs as Q6_K's high bits, minus 4 where bit j of hmask[c] is clear.
  static __m256i quants(const std::uint8_t* g, int j) {
    const __m256i low = byte_field(load_256(g + 32 + 32 * (j / 4)), 2 * (j % 4), 3);
    const __m256i high = byte_field_at(load_256(g), j, 2, 1);
    return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
  }
  // Sixteen 6-bit scales i = 2 j + t, stored + 32: low 4 bits in the low (i < 8) or high
  // nibble of byte i % 8, high 2 bits at bit 2 (i / 4) of byte 8 + i % 4.
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* /*min*/,
                      int stride) {
    const __m256 d = high_halves(gather(base + 106, offsets));
    const __m256i low_words[2] = {gather(base + 96, offsets), gather(base + 100, offsets)};
    const __m256i high_word = gather(base + 104, offsets);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const int byte = i % 8;
      const __m256i low = lane_bits(low_words[byte / 4], 8 * (byte % 4) + 4 * (i / 8), 15);
      const __m256i high = lane_bits(high_word, 8 * (i % 4) + 2 * (i / 4), 3);
      const __m256i sc =
          _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
      _mm256_storeu_ps(scale + i * stride, times(d, sc));
    }
  }
};

struct Q2_KInt16 {
  static constexpr DType kType = DType::kQ2_K;
  static constexpr int kSubBlocks = 2;
  static constexpr bool kHasMin = true;
  static constexpr int kGroupBlocks = 8;
  static constexpr int kGroupBytes = 84;  // scales[16] | qs[64] | fp16 d | fp16 dmin
  // Q3_K's 2-bit layout, unsigned.
  static __m256i quants(const std::uint8_t* g, int j) {
    return byte_field(load_256(g + 16 + 32 * (j / 4)), 2 * (j % 4), 3);
  }
  // Byte i = 2 j + t of scales: scale_t = d * (low nibble), min_t = -(dmin * high nibble).
  static void scales8(const std::uint8_t* base, __m256i offsets, float* scale, float* min,
                      int stride) {
    const __m256i header = gather(base + 80, offsets);
    const __m256 d = low_halves(header);
    const __m256 dmin = high_halves(header);
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const __m256i word = gather(base + 4 * w, offsets);
#pragma GCC unroll 4
      for (int byte = 0; byte < 4; ++byte) {
        _mm256_storeu_ps(scale + (4 * w + byte) * stride, times(d, lane_bits(word, 8 * byte, 15)));
        _mm256_storeu_ps(min + (4 * w + byte) * stride,
                         minus_times(dmin, lane_bits(word, 8 * byte + 4, 15)));
      }
    }
  }
};

// Calls f(Block{}) with dtype's struct (an int16_decodes() type).
template <typename F>
decltype(auto) with_int16_block(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kQ4_0: return f(Q4_0Int16{});
    case DType::kQ4_1: return f(Q4_1Int16{});
    case DType::kQ5_0: return f(Q5_0Int16{});
    case DType::kQ5_1: return f(Q5_1Int16{});
    case DType::kQ2_K: return f(Q2_KInt16{});
    case DType::kQ3_K: return f(Q3_KInt16{});
    case DType::kQ4_K: return f(Q4_KInt16{});
    case DType::kQ5_K: return f(Q5_KInt16{});
    case DType::kQ6_K: return f(Q6_KInt16{});
    default:
      PAGODA_CHECK(dtype == DType::kQ8_0) << "no int16 kernel for " << dtype_name(dtype);
      return f(Q8_0Int16{});
  }
}

}  // namespace
}  // namespace pagoda::cpu::int16
