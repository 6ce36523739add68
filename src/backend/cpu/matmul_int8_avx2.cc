#include "backend/cpu/matmul_int8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cpu/avxvnni_region.h"
#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_tile_rows.h"
#include "backend/cpu/int16_tile_rows_avx2.h"
#include "backend/cpu/matmul_int16_avx2.h"
#include "common/check.h"

namespace pagoda::cpu::avx2 {

void quantize_columns_int8(const float* x, std::int64_t m, std::int64_t k, std::int64_t vectors,
                           std::int32_t* quads, float* scales, float* scaled_sums,
                           std::int32_t* offsets) {
  PAGODA_CHECK(m >= 1 && m <= kInt16Lanes * vectors) << m << " rows in " << vectors << " vectors";
  const std::int64_t width = kInt16Lanes * vectors;
  // Row by row (quantize_rows_int16's q, s and sums at a code maximum of 127), then transposed.
  const std::int16_t* q = quantize_rows_scratch(127.0f, x, m, k, width, scales, scaled_sums);
  std::fill(quads, quads + k / 4 * width, 0);
  std::fill(offsets, offsets + k / 16 * width, 0);
  for (std::int64_t l = 0; l < m; ++l) {
    const std::int16_t* row = q + l * k;
    for (std::int64_t u = 0; u < k / 4; ++u) {
      std::uint32_t quad = 0;
      for (int c = 0; c < 4; ++c) {
        quad |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(row[4 * u + c])) << (8 * c);
      }
      quads[u * width + l] = static_cast<std::int32_t>(quad);
    }
    for (std::int64_t h = 0; h < k / 16; ++h) {
      std::int32_t sum = 0;
      for (int c = 0; c < 16; ++c) sum += row[16 * h + c];
      offsets[h * width + l] = -128 * sum;
    }
  }
}

namespace {

using int16::with_int16_block;

// The byte codes of int16_tile_rows.h's layouts, offset by 128 for vpdpbusd's unsigned operand.
struct Avx2ByteTiles : Avx2Tiles {
  static constexpr int kCodeBytes = 1;
  static void store_codes(std::int32_t* quants, __m256i codes) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(quants),
                       _mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
};

PAGODA_AVXVNNI_BEGIN

// avx2::int16_tile_typed (matmul_int16_avx2_kernels.inc) on quads: per 32-column block the tile's
// rows decoded as offset bytes, then 8 quads, each kVectors loads of x and kRows x kVectors
// vpdpbusd on the broadcast row quad, each sub-block's sums starting at x's offsets; the fp32
// epilogue is the contract's.
template <typename Block, int kVectors, int kRows, typename Rows>
void int8_tile_typed(const Int8Columns& x, std::int64_t k, const Rows& rows, float* acc) {
  constexpr int kWidth = static_cast<int>(kInt16Lanes) * kVectors;
  constexpr int kQuads = kInt16Block / 4;
  constexpr int kSub = Block::kSubBlocks;
  constexpr int kSubQuads = kQuads / kSub;
  constexpr int kGroup = Block::kGroupBlocks;
  // Q2_K: mins per 16 columns take x's sums per 16 columns, which the offsets hold (times -128).
  constexpr bool kHalfSums = kSub == 2 && Block::kHasMin;
  static_assert(kRows <= Rows::kScaleRows);
  const std::int64_t num_blocks = k / kInt16Block;
  alignas(64) std::int32_t quants[Rows::kQuantInts] = {};
  alignas(32) float group_scale[kGroup * kSub][Rows::kScaleRows] = {};
  alignas(32) float group_min[kGroup * kSub][Rows::kScaleRows] = {};
  __m256 a[kRows][kVectors];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) a[r][v] = _mm256_loadu_ps(acc + r * kWidth + v * 8);
  }
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const int j = static_cast<int>(b % kGroup);
    const std::int64_t g = b / kGroup;
    if (kGroup > 1 && j == 0) rows.scales8(g, group_scale[0], group_min[0]);
    for (int step = 0; step < Rows::kDecodeSteps; ++step) {
      rows.decode(step, g, j, quants, group_scale[0], group_min[0]);
    }
    rows.prefetch_next(b);
    const std::int32_t* xb = x.quads + b * kQuads * kWidth;
    const std::int32_t* ob = x.offsets + 2 * b * kWidth;
    __m256 s[kVectors];
    for (int v = 0; v < kVectors; ++v) s[v] = _mm256_loadu_ps(x.scales + b * kWidth + v * 8);
    for (int t = 0; t < kSub; ++t) {
      __m256i start[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const auto* o = reinterpret_cast<const __m256i*>(ob + v * 8);
        start[v] =
            kSub == 2 ? _mm256_loadu_si256(o + t * kWidth / 8)
                      : _mm256_add_epi32(_mm256_loadu_si256(o), _mm256_loadu_si256(o + kWidth / 8));
      }
      __m256i sums[kRows][kVectors];
      for (int r = 0; r < kRows; ++r) {
        for (int v = 0; v < kVectors; ++v) sums[r][v] = start[v];
      }
      for (int u = t * kSubQuads; u < (t + 1) * kSubQuads; ++u) {
        __m256i xv[kVectors];
        for (int v = 0; v < kVectors; ++v) {
          xv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + u * kWidth + v * 8));
        }
        for (int r = 0; r < kRows; ++r) {
          const __m256i wv = _mm256_set1_epi32(quants[Rows::unit_index(r, u)]);
          for (int v = 0; v < kVectors; ++v) {
            sums[r][v] = _mm256_dpbusd_avx_epi32(sums[r][v], wv, xv[v]);
          }
        }
      }
      __m256 qs[kVectors];
      if constexpr (kHalfSums) {
        // -128 h and its product with -1/128 are exact: float(h) * s, as int16_tile.
        for (int v = 0; v < kVectors; ++v) {
          const __m256 h = _mm256_mul_ps(_mm256_cvtepi32_ps(start[v]), _mm256_set1_ps(-1.0f / 128));
          qs[v] = _mm256_mul_ps(h, s[v]);
        }
      } else if constexpr (Block::kHasMin) {
        for (int v = 0; v < kVectors; ++v) {
          qs[v] = _mm256_loadu_ps(x.scaled_sums + b * kWidth + v * 8);
        }
      }
      for (int r = 0; r < kRows; ++r) {
        const __m256 d = _mm256_set1_ps(group_scale[j * kSub + t][r]);
        for (int v = 0; v < kVectors; ++v) {
          a[r][v] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r][v]), _mm256_mul_ps(d, s[v]), a[r][v]);
          if constexpr (Block::kHasMin) {
            a[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(group_min[j * kSub + t][r]), qs[v], a[r][v]);
          }
        }
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) _mm256_storeu_ps(acc + r * kWidth + v * 8, a[r][v]);
  }
}

PAGODA_AVXVNNI_END

}  // namespace

void int8_tile(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
               const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    const auto run = [&](auto vectors_constant) {
      constexpr int kVectors = decltype(vectors_constant)::value;
      constexpr int kRows = static_cast<int>(int16_tile_rows(kVectors));
      const int16::RowMajorTile<Block, kRows, Avx2ByteTiles> rows(w, w_stride, num_rows, next,
                                                                  next_rows);
      int8_tile_typed<Block, kVectors, kRows>(x, k, rows, acc);
    };
    if (vectors == 1) return run(std::integral_constant<int, 1>{});
    PAGODA_CHECK_EQ(vectors, 2) << "int8_tile takes up to " << kInt16PieceRows << " rows";
    run(std::integral_constant<int, 2>{});
  });
}

void int8_tile_interleaved(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
                           const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                           std::int64_t num_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    if constexpr (int16::kInterleaves<Block>) {
      int16::check_whole_groups<Block, kInt16Block>(k);
      PAGODA_CHECK(vectors == 1 || vectors == 2)
          << "int8_tile_interleaved takes up to " << kInt16PieceRows << " rows";
      PAGODA_CHECK_LE(num_rows, int16_panel_tile_rows(vectors));
      const int16::PanelTile<Block, Avx2ByteTiles> rows(panels, row_bytes, n0, num_rows);
      if (vectors == 1) return int8_tile_typed<Block, 1, 8>(x, k, rows, acc);
      // A panel's third tile of two vectors has 4 rows: no work on 2 rows that are not there.
      if (num_rows <= 4) return int8_tile_typed<Block, 2, 4>(x, k, rows, acc);
      int8_tile_typed<Block, 2, 6>(x, k, rows, acc);
    } else {
      PAGODA_CHECK(false) << "no interleaved layout of " << dtype_name(dtype);
    }
  });
}

}  // namespace pagoda::cpu::avx2
