// AVX-512VL on top of the file's AVX-512F/BW/VNNI flags, as matmul_int16_avx512.cc (the shared
// block decoders' 256-bit chains merge into vpternlog).
#pragma GCC target("avx512vl")

#include "backend/cpu/matmul_int8_avx512.h"

#include <immintrin.h>

#include <limits>

#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_tile_rows.h"
#include "backend/cpu/int16_tile_rows_avx512.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

void quantize_columns_int8(const float* xt, std::int64_t k, std::int64_t vectors,
                           std::int32_t* quads, float* scales, float* scaled_sums,
                           std::int32_t* offsets) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int8 activations come in blocks of 32 columns";
  const std::int64_t width = 16 * vectors;
  const __m512 code_max = _mm512_set1_ps(127.0f);
  const __m512 float_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  const __m512i low_byte = _mm512_set1_epi32(0xFF);
  for (std::int64_t b = 0; b < k / kInt16Block; ++b) {
    for (std::int64_t v = 0; v < vectors; ++v) {
      const float* column = xt + b * kInt16Block * width + v * 16;
      // quantize_columns_int16's operations, in its order.
      __m512 amax = _mm512_setzero_ps();
      __mmask16 non_finite = 0;
      for (int c = 0; c < kInt16Block; ++c) {
        const __m512 magnitude = _mm512_abs_ps(_mm512_loadu_ps(column + c * width));
        amax = _mm512_max_ps(amax, magnitude);
        non_finite |= _mm512_cmp_ps_mask(magnitude, float_max, _CMP_NLE_UQ);
      }
      const __mmask16 scaled = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ) &
                               static_cast<__mmask16>(~non_finite);
      const __m512 to_int = _mm512_maskz_div_ps(scaled, code_max, amax);
      const __m512 s = _mm512_mask_blend_ps(non_finite, _mm512_div_ps(amax, code_max), nan);
      __m512i half_sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      std::int32_t* out = quads + b * (kInt16Block / 4) * width + v * 16;
      for (int u = 0; u < kInt16Block / 4; ++u) {
        __m512i quad = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          // cvtps rounds to nearest even (MXCSR default); |x * to_int| <= 127.
          const __m512i q = _mm512_cvtps_epi32(
              _mm512_mul_ps(_mm512_loadu_ps(column + (4 * u + c) * width), to_int));
          half_sums[u / 4] = _mm512_add_epi32(half_sums[u / 4], q);
          quad = _mm512_or_si512(quad, _mm512_slli_epi32(_mm512_and_si512(q, low_byte), 8 * c));
        }
        _mm512_storeu_si512(out + u * width, quad);
      }
      const __m512i qsum = _mm512_add_epi32(half_sums[0], half_sums[1]);
      _mm512_storeu_ps(scales + b * width + v * 16, s);
      _mm512_storeu_ps(scaled_sums + b * width + v * 16,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(qsum), s));
      for (int h = 0; h < 2; ++h) {
        _mm512_storeu_si512(
            offsets + (2 * b + h) * width + v * 16,
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(half_sums[h], 7)));
      }
    }
  }
}

namespace {

using int16::with_int16_block;

// int16_tile_typed (matmul_int16_avx512.cc) on quads: per 32-column block 8 quads, each kVectors
// loads of x and kRows x kVectors vpdpbusd on an embedded broadcast of the row's offset codes,
// each sub-block's sums starting at x's offsets; the decode of the next block and the fp32
// epilogue are int16_tile_typed's.
template <typename Block, int kVectors, typename Rows>
void int8_tile_typed(const Int8Columns& x, std::int64_t k, const Rows& rows, float* acc) {
  constexpr int kRows = static_cast<int>(int16_tile_rows(kVectors));
  constexpr int kWidth = 16 * kVectors;
  constexpr int kQuads = kInt16Block / 4;
  constexpr int kSub = Block::kSubBlocks;
  constexpr int kSubQuads = kQuads / kSub;
  constexpr int kGroup = Block::kGroupBlocks;
  constexpr int kSteps = Rows::kDecodeSteps;
  // Q2_K: mins per 16 columns take x's sums per 16 columns, which the offsets hold (times -128).
  constexpr bool kHalfSums = kSub == 2 && Block::kHasMin;
  const std::int64_t num_blocks = k / kInt16Block;
  static_assert(kRows <= 8 && Rows::kScaleRows == 8 && Rows::kQuantInts <= 8 * kQuads);
  alignas(64) std::int32_t quants[2][8 * kQuads] = {};
  alignas(32) float group_scale[kGroup == 1 ? 2 : kGroup * kSub][8] = {};
  alignas(32) float group_min[kGroup == 1 ? 2 : kGroup * kSub][8] = {};
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
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const int j = static_cast<int>(b % kGroup);
    if (kGroup > 1 && j == 0) rows.scales8(b / kGroup, group_scale[0], group_min[0]);
    const int current = static_cast<int>(b & 1);
    const int following = current ^ 1;
    const bool has_following = b + 1 < num_blocks;
    rows.prefetch_next(b);
    const std::int32_t* xb = x.quads + b * kQuads * kWidth;
    const std::int32_t* ob = x.offsets + 2 * b * kWidth;
    __m512 s[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) s[v] = _mm512_loadu_ps(x.scales + b * kWidth + v * 16);
#pragma GCC unroll 2
    for (int t = 0; t < kSub; ++t) {
      __m512i start[kVectors];
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
        start[v] = kSub == 2 ? _mm512_loadu_si512(ob + t * kWidth + v * 16)
                             : _mm512_add_epi32(_mm512_loadu_si512(ob + v * 16),
                                                _mm512_loadu_si512(ob + kWidth + v * 16));
      }
      __m512i sums[kRows][kVectors];
#pragma GCC unroll 8
      for (int u = t * kSubQuads; u < (t + 1) * kSubQuads; ++u) {
        __m512i xv[kVectors];
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) xv[v] = _mm512_loadu_si512(xb + u * kWidth + v * 16);
#pragma GCC unroll 12
        for (int r = 0; r < kRows; ++r) {
          const __m512i wv = _mm512_set1_epi32(quants[current][Rows::unit_index(r, u)]);
#pragma GCC unroll 4
          for (int v = 0; v < kVectors; ++v) {
            sums[r][v] = _mm512_dpbusd_epi32(u == t * kSubQuads ? start[v] : sums[r][v], wv, xv[v]);
          }
        }
#pragma GCC unroll 8
        for (int step = 0; step < kSteps; ++step) {
          if (step * kQuads / kSteps == u && has_following) decode(step, following, b + 1);
        }
      }
      __m512 qs[kVectors];
      if constexpr (kHalfSums) {
        // -128 h is exact in fp32 and so is its product with -1/128: float(h) * s, as int16_tile.
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) {
          const __m512 h = _mm512_mul_ps(_mm512_cvtepi32_ps(start[v]), _mm512_set1_ps(-1.0f / 128));
          qs[v] = _mm512_mul_ps(h, s[v]);
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

void int8_tile(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
               const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    if (vectors == 1) {
      const int16::RowMajorTile<Block, int16_tile_rows(1), Avx512ByteTiles> rows(
          w, w_stride, num_rows, next, next_rows);
      return int8_tile_typed<Block, 1>(x, k, rows, acc);
    }
    PAGODA_CHECK_EQ(vectors, 2) << "int8_tile takes up to " << kInt16PieceRows << " rows";
    const int16::RowMajorTile<Block, int16_tile_rows(2), Avx512ByteTiles> rows(
        w, w_stride, num_rows, next, next_rows);
    int8_tile_typed<Block, 2>(x, k, rows, acc);
  });
}

void int8_tile_interleaved(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
                           const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                           std::int64_t num_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    if constexpr (int16::kInterleaves<Block>) {
      int16::check_whole_groups<Block, kInt16Block>(k);
      const int16::PanelTile<Block, Avx512ByteTiles> rows(panels, row_bytes, n0, num_rows);
      if (vectors == 1) return int8_tile_typed<Block, 1>(x, k, rows, acc);
      PAGODA_CHECK_EQ(vectors, 2) << "int8_tile takes up to " << kInt16PieceRows << " rows";
      int8_tile_typed<Block, 2>(x, k, rows, acc);
    } else {
      PAGODA_CHECK(false) << "no interleaved layout of " << dtype_name(dtype);
    }
  });
}

}  // namespace pagoda::cpu::avx512
