#include "backend/cpu/matmul_int16_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/amx_tile_config.h"
#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_types.h"
#include "common/check.h"

namespace pagoda::cpu::amx {

namespace {

using int16::with_int16_block;

constexpr int kBlock = 32;
constexpr int kXRows = static_cast<int>(kTileRows);  // rows of x per A tile
constexpr int kWRows = 16;                           // weight rows per B tile

// Tiles: one A (16 tile rows of x) in tmm4, the two weight tiles' B in tmm5 / tmm6, and two sets
// of C (int32 16 x 16, A times each B): tmm0 / tmm1 and tmm2 / tmm3, so one block's products run
// while the previous one's sums are stored. GCC's tile intrinsics paste the number into the
// instruction, so the code below spells it.
void configure() {
  TileConfig config;
  for (int c = 0; c < 4; ++c) {
    config.rows[c] = 16;
    config.colsb[c] = 64;
  }
  config.rows[4] = 16;
  config.colsb[4] = kBlock;
  for (int b = 5; b < 7; ++b) {
    config.rows[b] = kBlock / 4;
    config.colsb[b] = 64;
  }
  load_tile_config(config);
}

// Set kSet's two C = A . B0, A . B1: A at x (stride x_stride bytes), B0 / B1 at codes0 / codes1
// (64-byte rows).
template <int kSet>
inline void multiply(const std::int8_t* x, std::size_t x_stride, const std::int32_t* codes0,
                     const std::int32_t* codes1) {
  _tile_loadd(4, x, x_stride);
  _tile_loadd(5, codes0, 64);
  _tile_loadd(6, codes1, 64);
  if constexpr (kSet == 0) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 6);
  } else {
    _tile_zero(2);
    _tile_zero(3);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 6);
  }
}

template <int kSet>
inline void store_sums(std::int32_t* sums0, std::int32_t* sums1) {
  if constexpr (kSet == 0) {
    _tile_stored(0, sums0, 64);
    _tile_stored(1, sums1, 64);
  } else {
    _tile_stored(2, sums0, 64);
    _tile_stored(3, sums1, 64);
  }
}

// 16 weight rows' blocks in tdpbssd's B layout, per block 8 rows of 16 dwords (dword n of row
// c / 4 holding row n's codes c .. c + 3), and per block the 16 rows' scales, mins and 128 times
// the sum of their codes.
struct WeightTile {
  std::vector<std::int32_t> codes;      // [num_blocks][8][16]
  std::vector<float> scale;             // [num_blocks][16]
  std::vector<float> min;               // [num_blocks][16]
  std::vector<std::int32_t> code_sums;  // [num_blocks][16]
};

template <typename Block>
void decode_weight_tile(const std::uint8_t* w, std::size_t w_stride, int count,
                        std::int64_t num_blocks, WeightTile& out) {
  constexpr int kGroup = Block::kGroupBlocks;
  out.codes.resize(static_cast<std::size_t>(num_blocks * 8 * kWRows));
  out.scale.resize(static_cast<std::size_t>(num_blocks * kWRows));
  out.min.resize(out.scale.size());
  out.code_sums.resize(out.scale.size());
  // Rows past `count` repeat the last row: finite sums, never stored.
  const std::uint8_t* rows[kWRows];
  alignas(32) std::int32_t offsets[kWRows];
  for (int r = 0; r < kWRows; ++r) {
    offsets[r] =
        static_cast<std::int32_t>(static_cast<std::size_t>(std::min(r, count - 1)) * w_stride);
    rows[r] = w + offsets[r];
  }
  const __m256i offsets_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
  const __m256i offsets_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 8));
  // Dword index of row n's dword c4 in the 16 rows' codes stored row by row: 8 n + c4.
  const __m512i by_row =
      _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
  const __m512i ones = _mm512_set1_epi8(1);
  alignas(64) std::int32_t row_codes[kWRows][8];
  for (std::int64_t g = 0; g < num_blocks / kGroup; ++g) {
    const std::size_t at = static_cast<std::size_t>(g) * Block::kGroupBytes;
    float* scale = out.scale.data() + g * kGroup * kWRows;
    float* min = out.min.data() + g * kGroup * kWRows;
    Block::scales8(w + at, offsets_low, scale, min, kWRows);
    Block::scales8(w + at, offsets_high, scale + 8, min + 8, kWRows);
    int16::for_each_block<kGroup>([&](auto j) {
      for (int r = 0; r < kWRows; ++r) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(row_codes[r]),
                           Block::quants(rows[r] + at, j));
      }
      const std::int64_t b = g * kGroup + j;
      std::int32_t* codes = out.codes.data() + b * 8 * kWRows;
      __m512i sums = _mm512_setzero_si512();
      for (int c4 = 0; c4 < 8; ++c4) {
        const __m512i column =
            _mm512_i32gather_epi32(_mm512_add_epi32(by_row, _mm512_set1_epi32(c4)), row_codes, 4);
        _mm512_storeu_si512(codes + c4 * kWRows, column);
        // Lane n: row n's four codes summed (vpdpbusd with ones: 1 * code, exact).
        sums = _mm512_dpbusd_epi32(sums, ones, column);
      }
      _mm512_storeu_si512(out.code_sums.data() + b * kWRows, _mm512_slli_epi32(sums, 7));
    });
  }
}

template <typename Block>
void int16_tiles_typed(const std::int8_t* split, const float* scales, const float* scaled_sums,
                       std::int64_t m, std::int64_t k, const std::uint8_t* w, std::size_t w_stride,
                       std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t ldy) {
  static_assert(Block::kSubBlocks == 1, "one scale per 32 columns: one product per block");
  const std::int64_t num_blocks = k / kBlock;
  configure();
  // Two weight tiles (32 rows) per pass over x: each A load serves two products.
  thread_local WeightTile tiles[2];
  alignas(64) std::int32_t sums[2][16][kWRows];  // the two C of one set
  const std::size_t x_stride = static_cast<std::size_t>(k);
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += 2 * kWRows) {
    int counts[2];
    for (int t = 0; t < 2; ++t) {
      // A missing second tile repeats the first's last row: finite sums, never stored.
      const std::int64_t first = std::min(n0 + t * kWRows, n_end - 1);
      counts[t] = static_cast<int>(std::clamp<std::int64_t>(n_end - (n0 + t * kWRows), 0, kWRows));
      decode_weight_tile<Block>(w + static_cast<std::size_t>(first) * w_stride, w_stride,
                                std::max(counts[t], 1), num_blocks, tiles[t]);
    }
    for (std::int64_t i0 = 0; i0 < m; i0 += kXRows) {
      const std::int8_t* x = split + i0 * 2 * k;  // this group's 16 tile rows
      auto x_at = [&](std::int64_t b) { return x + b * kBlock; };
      auto codes_at = [&](int t, std::int64_t b) { return tiles[t].codes.data() + b * 8 * kWRows; };
      __m512 acc[2][kXRows];
#pragma GCC unroll 2
      for (int t = 0; t < 2; ++t) {
#pragma GCC unroll 8
        for (int i = 0; i < kXRows; ++i) acc[t][i] = _mm512_setzero_ps();
      }
      // The contract's fp32 steps for block b, from its sums.
      auto join = [&](std::int64_t b) {
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          const __m512 d = _mm512_loadu_ps(tiles[t].scale.data() + b * kWRows);
          const __m512i code_sums = _mm512_loadu_si512(tiles[t].code_sums.data() + b * kWRows);
#pragma GCC unroll 8
          for (int i = 0; i < kXRows; ++i) {
            const __m512i dot = _mm512_add_epi32(
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(sums[t][i]), 8),
                                 _mm512_load_si512(sums[t][kXRows + i])),
                code_sums);
            const float s_i = scales[(i0 + i) * num_blocks + b];
            acc[t][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                        _mm512_mul_ps(d, _mm512_set1_ps(s_i)), acc[t][i]);
          }
          if constexpr (Block::kHasMin) {
            const __m512 min = _mm512_loadu_ps(tiles[t].min.data() + b * kWRows);
#pragma GCC unroll 8
            for (int i = 0; i < kXRows; ++i) {
              acc[t][i] = _mm512_fmadd_ps(
                  min, _mm512_set1_ps(scaled_sums[(i0 + i) * num_blocks + b]), acc[t][i]);
            }
          }
        }
      };
      // Block b + 1's products are queued before block b's sums are stored and joined.
      multiply<0>(x_at(0), x_stride, codes_at(0, 0), codes_at(1, 0));
      for (std::int64_t b = 0; b < num_blocks; b += 2) {
        if (b + 1 < num_blocks) {
          multiply<1>(x_at(b + 1), x_stride, codes_at(0, b + 1), codes_at(1, b + 1));
        }
        store_sums<0>(sums[0][0], sums[1][0]);
        join(b);
        if (b + 1 < num_blocks) {
          if (b + 2 < num_blocks) {
            multiply<0>(x_at(b + 2), x_stride, codes_at(0, b + 2), codes_at(1, b + 2));
          }
          store_sums<1>(sums[0][0], sums[1][0]);
          join(b + 1);
        }
      }
      for (int t = 0; t < 2; ++t) {
        if (counts[t] == 0) continue;
        const auto lanes = static_cast<__mmask16>((1u << counts[t]) - 1);
        for (int i = 0; i < kXRows && i0 + i < m; ++i) {
          _mm512_mask_storeu_ps(y + (i0 + i) * ldy + n0 + t * kWRows, lanes, acc[t][i]);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

bool takes(DType dtype) {
  if (!cpu::int16_decodes(dtype)) return false;
  return with_int16_block(dtype, [](auto block) { return decltype(block)::kSubBlocks == 1; });
}

void split_bytes(const std::int16_t* q, std::int64_t m_pad, std::int64_t k, std::int8_t* split) {
  PAGODA_CHECK_EQ(m_pad % kTileRows, 0) << "whole tiles of x";
  for (std::int64_t i = 0; i < m_pad; ++i) {
    const std::int16_t* row = q + i * k;
    std::int8_t* high = split + (i / kTileRows * 2 * kTileRows + i % kTileRows) * k;
    std::int8_t* low = high + kTileRows * k;
    std::int64_t c = 0;
    for (; c + 32 <= k; c += 32) {
      const __m512i v = _mm512_loadu_si512(row + c);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(high + c),
                          _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8)));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(low + c),
          _mm512_cvtepi16_epi8(_mm512_sub_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0xFF)),
                                                _mm512_set1_epi16(128))));
    }
    for (; c < k; ++c) {
      high[c] = static_cast<std::int8_t>(row[c] >> 8);
      low[c] = static_cast<std::int8_t>((row[c] & 0xFF) - 128);
    }
  }
}

void int16_tiles(DType dtype, const std::int8_t* split, const float* scales,
                 const float* scaled_sums, std::int64_t m, std::int64_t k, const std::uint8_t* w,
                 std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end, float* y,
                 std::int64_t ldy) {
  PAGODA_CHECK(takes(dtype)) << "no AMX kernel for " << dtype_name(dtype);
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    if constexpr (Block::kSubBlocks == 1) {
      int16::check_whole_groups<Block, kBlock>(k);
      int16_tiles_typed<Block>(split, scales, scaled_sums, m, k, w, w_stride, n_begin, n_end, y,
                               ldy);
    }
  });
}

}  // namespace pagoda::cpu::amx
