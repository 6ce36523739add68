// AVX-512VL on top of the file's AVX-512F/BW/VNNI flags, as matmul_int16_avx512.cc (the shared
// block decoders' 256-bit chains merge into vpternlog).
#pragma GCC target("avx512vl")

#include "backend/cpu/matmul_int8_avx512.h"

#include <immintrin.h>

#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_tile_avx512.h"
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
  const __m512i low_byte = _mm512_set1_epi32(0xFF);
  for (std::int64_t b = 0; b < k / kInt16Block; ++b) {
    for (std::int64_t v = 0; v < vectors; ++v) {
      const float* column = xt + b * kInt16Block * width + v * 16;
      const ColumnBlock block = column_block_scale(column, width, code_max);
      __m512i half_sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      std::int32_t* out = quads + b * (kInt16Block / 4) * width + v * 16;
      for (int u = 0; u < kInt16Block / 4; ++u) {
        __m512i quad = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          const __m512i q = column_codes(column, width, 4 * u + c, block.to_int);
          half_sums[u / 4] = _mm512_add_epi32(half_sums[u / 4], q);
          quad = _mm512_or_si512(quad, _mm512_slli_epi32(_mm512_and_si512(q, low_byte), 8 * c));
        }
        _mm512_storeu_si512(out + u * width, quad);
      }
      const __m512i qsum = _mm512_add_epi32(half_sums[0], half_sums[1]);
      _mm512_storeu_ps(scales + b * width + v * 16, block.s);
      _mm512_storeu_ps(scaled_sums + b * width + v * 16,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(qsum), block.s));
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

// x as byte quads for tile_typed (int16_tile_avx512.h): vpdpbusd of the offset weight codes by
// x's bytes, each sub-block's sums starting at its offsets.
struct Int8Quads {
  static constexpr int kUnits = kInt16Block / 4;
  const std::int32_t* units;
  const float* scales;
  const float* scaled_sums;
  const std::int32_t* offsets;

  template <int kSub, int kWidth>
  __m512i start(std::int64_t b, int t, int v) const {
    const std::int32_t* o = offsets + 2 * b * kWidth + v * 16;
    return kSub == 2 ? _mm512_loadu_si512(o + t * kWidth)
                     : _mm512_add_epi32(_mm512_loadu_si512(o), _mm512_loadu_si512(o + kWidth));
  }
  static __m512i first(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, w, x);
  }
  static __m512i mac(__m512i sum, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(sum, w, x); }
  static __m512i half_step(__m512i half, __m512i /*x*/, bool /*first*/) { return half; }
  // Q2_K's: start = -128 h, and its product with -1/128 is exact: float(h), as int16_tile's.
  static __m512 half_sums(__m512i /*half*/, __m512i start) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(start), _mm512_set1_ps(-1.0f / 128));
  }
};

Int8Quads quads_of(const Int8Columns& x) {
  return {.units = x.quads, .scales = x.scales, .scaled_sums = x.scaled_sums, .offsets = x.offsets};
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
      return tile_typed<Block, 1>(quads_of(x), k, rows, acc);
    }
    PAGODA_CHECK_EQ(vectors, 2) << "int8_tile takes up to " << kInt16PieceRows << " rows";
    const int16::RowMajorTile<Block, int16_tile_rows(2), Avx512ByteTiles> rows(
        w, w_stride, num_rows, next, next_rows);
    tile_typed<Block, 2>(quads_of(x), k, rows, acc);
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
      if (vectors == 1) return tile_typed<Block, 1>(quads_of(x), k, rows, acc);
      PAGODA_CHECK_EQ(vectors, 2) << "int8_tile takes up to " << kInt16PieceRows << " rows";
      tile_typed<Block, 2>(quads_of(x), k, rows, acc);
    } else {
      PAGODA_CHECK(false) << "no interleaved layout of " << dtype_name(dtype);
    }
  });
}

}  // namespace pagoda::cpu::avx512
