// The AVX-512 tiles' x and loop (int16_tile, matmul_int16_avx512.h, and int8_tile,
// matmul_int8_avx512.h): a block of x's columns quantized (ColumnBlock), and the loop written once
// over how x's codes are multiplied, a `Codes` policy:
//
//   kUnits               int32 units of x per 32-column block and lane: 16 pairs of int16 codes
//                        (vpdpwssd) or 8 quads of byte codes (vpdpbusd)
//   units, scales, scaled_sums
//                        x: [k / 32 * kUnits, lanes], [k / 32, lanes], [k / 32, lanes]
//   start<kSub, kWidth>(b, t, v)
//                        what sub-block t's int32 sums start from (vector v of block b; kSub
//                        sub-blocks a block, kWidth lanes)
//   first(start, w, x)   the sums after the sub-block's first unit; mac(sum, w, x) after each next
//   half_sums(h, start)  x's sums over the sub-block's 16 columns as fp32 (Q2_K's mins), from what
//                        half_step(h, x, first) gathered over its units
//
// The weights come from an int16_tile_rows.h layout whose Isa stores the codes as that policy
// multiplies them. AVX-512 intrinsics, internal linkage: include only from translation units
// compiled with AVX-512 F/BW/VNNI (and VL) as matmul_int16_avx512.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "backend/cpu/matmul_int16_avx512.h"

namespace pagoda::cpu::avx512 {
namespace {

// One 32-column block of x transposed (column c of 16 rows at column + c * width) as the contract
// quantizes it for codes up to code_max: to_int, and s per lane (NaN where a value is not finite,
// to_int 0 there and where amax is 0). The tiles' quantizers, quantize_columns_int16 and _int8.
struct ColumnBlock {
  __m512 to_int;
  __m512 s;
};

inline ColumnBlock column_block_scale(const float* column, std::int64_t width, __m512 code_max) {
  const __m512 float_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  __m512 amax = _mm512_setzero_ps();
  __mmask16 non_finite = 0;
  for (int c = 0; c < kInt16Block; ++c) {
    const __m512 magnitude = _mm512_abs_ps(_mm512_loadu_ps(column + c * width));
    amax = _mm512_max_ps(amax, magnitude);
    // Not <= FLT_MAX: infinite or NaN (max_ps would let a NaN slip past).
    non_finite |= _mm512_cmp_ps_mask(magnitude, float_max, _CMP_NLE_UQ);
  }
  const __mmask16 scaled = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ) &
                           static_cast<__mmask16>(~non_finite);
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  return {.to_int = _mm512_maskz_div_ps(scaled, code_max, amax),
          .s = _mm512_mask_blend_ps(non_finite, _mm512_div_ps(amax, code_max), nan)};
}

// Column c's codes: cvtps rounds to nearest even (MXCSR default); |x * to_int| <= code_max.
inline __m512i column_codes(const float* column, std::int64_t width, int c, __m512 to_int) {
  return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(column + c * width), to_int));
}

// Per 32-column block: kUnits units, each kVectors loads of x and kRows x kVectors dot products
// whose weight unit is an embedded broadcast; after a sub-block's last unit the sums join the fp32
// accumulators. Between units the next block is decoded into the other buffer, one of the
// layout's kDecodeSteps every kUnits / kDecodeSteps units; a group's scales (all its blocks, all
// rows) are decoded before its first block.
template <typename Block, int kVectors, typename Rows, typename Codes>
void tile_typed(const Codes& x, std::int64_t k, const Rows& rows, float* acc) {
  constexpr int kRows = static_cast<int>(int16_tile_rows(kVectors));
  constexpr int kWidth = 16 * kVectors;
  constexpr int kUnits = Codes::kUnits;
  constexpr int kSub = Block::kSubBlocks;
  constexpr int kSubUnits = kUnits / kSub;
  constexpr int kGroup = Block::kGroupBlocks;
  constexpr int kSteps = Rows::kDecodeSteps;
  // Q2_K: mins per 16 columns need x's sums per 16 columns (Codes::half_sums).
  constexpr bool kHalfSums = kSub == 2 && Block::kHasMin;
  const std::int64_t num_blocks = k / kInt16Block;
  static_assert(kRows <= 8 && Rows::kScaleRows == 8 && Rows::kQuantInts <= 8 * kUnits);
  alignas(64) std::int32_t quants[2][8 * kUnits] = {};
  // Scales of the current group ([j * kSub + t][row]) or, for one-block groups, of each buffer's
  // block ([buffer][row], read with its quants: cheaper than a gather per block).
  alignas(32) float group_scale[kGroup == 1 ? 2 : kGroup * kSub][8] = {};
  alignas(32) float group_min[kGroup == 1 ? 2 : kGroup * kSub][8] = {};
  // Block b's decode into `buffer` (the one-block scales too; K-quants' come from scales8).
  const auto decode = [&](int step, int buffer, std::int64_t b) {
    rows.decode(step, b / kGroup, static_cast<int>(b % kGroup), quants[buffer], group_scale[buffer],
                group_min[buffer]);
  };
  for (int step = 0; step < kSteps; ++step) decode(step, 0, 0);
  __m512 a[kRows][kVectors];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_loadu_ps(acc + r * kWidth + v * 16);
  }
  // A runtime block loop: unrolling a group's blocks (constant shifts, as int16_direct does)
  // makes the tile 1.6x slower (8 copies of the unrolled unit loop; one thread, 16 x 2048 *
  // Q4_K 512x2048).
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const int j = static_cast<int>(b % kGroup);
    if (kGroup > 1 && j == 0) rows.scales8(b / kGroup, group_scale[0], group_min[0]);
    const int current = static_cast<int>(b & 1);
    const int following = current ^ 1;
    const bool has_following = b + 1 < num_blocks;
    rows.prefetch_next(b);
    const std::int32_t* xb = x.units + b * kUnits * kWidth;
    __m512 s[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) s[v] = _mm512_loadu_ps(x.scales + b * kWidth + v * 16);
#pragma GCC unroll 2
    for (int t = 0; t < kSub; ++t) {
      __m512i start[kVectors];
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) start[v] = x.template start<kSub, kWidth>(b, t, v);
      __m512i sums[kRows][kVectors];
      __m512i half[kVectors] = {};
#pragma GCC unroll 16
      for (int u = t * kSubUnits; u < (t + 1) * kSubUnits; ++u) {
        const bool first = u == t * kSubUnits;
        __m512i xv[kVectors];
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) xv[v] = _mm512_loadu_si512(xb + u * kWidth + v * 16);
        if constexpr (kHalfSums) {
#pragma GCC unroll 4
          for (int v = 0; v < kVectors; ++v) half[v] = Codes::half_step(half[v], xv[v], first);
        }
#pragma GCC unroll 12
        for (int r = 0; r < kRows; ++r) {
          const __m512i wv = _mm512_set1_epi32(quants[current][Rows::unit_index(r, u)]);
#pragma GCC unroll 4
          for (int v = 0; v < kVectors; ++v) {
            sums[r][v] =
                first ? Codes::first(start[v], wv, xv[v]) : Codes::mac(sums[r][v], wv, xv[v]);
          }
        }
#pragma GCC unroll 16
        for (int step = 0; step < kSteps; ++step) {
          if (step * kUnits / kSteps == u && has_following) decode(step, following, b + 1);
        }
      }
      __m512 qs[kVectors];
      if constexpr (kHalfSums) {
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) {
          qs[v] = _mm512_mul_ps(Codes::half_sums(half[v], start[v]), s[v]);
        }
      } else if constexpr (Block::kHasMin) {
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) {
          qs[v] = _mm512_loadu_ps(x.scaled_sums + b * kWidth + v * 16);
        }
      }
#pragma GCC unroll 12
      for (int r = 0; r < kRows; ++r) {
        const int at = kGroup == 1 ? current : j * kSub + t;
        const __m512 d = _mm512_set1_ps(group_scale[at][r]);
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) {
          a[r][v] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r][v]), _mm512_mul_ps(d, s[v]), a[r][v]);
          if constexpr (Block::kHasMin) {
            a[r][v] = _mm512_fmadd_ps(_mm512_set1_ps(group_min[at][r]), qs[v], a[r][v]);
          }
        }
      }
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(acc + r * kWidth + v * 16, a[r][v]);
  }
}

}  // namespace
}  // namespace pagoda::cpu::avx512
