#include "backend/cpu/matmul_avx512.h"

#include <immintrin.h>

#include "backend/cpu/weight_blocks_avx512.h"

namespace pagoda::cpu::avx512 {

namespace {

constexpr int kRowTile = 4;
// Rows of x per dot_tile: 6 x 4 accumulators + 4 weight vectors + 1 x vector = 29 of the 32 zmm
// registers, 10 loads per 24 FMAs (a 4 x 4 tile needs 8 per 16).
constexpr int kDotRowTile = 6;

// Same scheme as the AVX2 kernel: per block d * (q · x) + m * sum(x), so only one FMA per block
// lands on the loop-carried accumulator.
template <typename Block, int kRows>
void dot_weight_row(const float* x, std::int64_t k, const float* sums, const std::uint8_t* w_row,
                    float* y, std::int64_t ldy) {
  const std::int64_t num_blocks = k / kBlock;
  __m512 acc[kRows];
  float min_acc[kRows];
  for (int r = 0; r < kRows; ++r) {
    acc[r] = _mm512_setzero_ps();
    min_acc[r] = 0.0f;
  }
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    __m512 q[2];
    float scale, min;
    Block::decode(w_row + b * Block::kBytes, q, scale, min);
    const __m512 scale_v = _mm512_set1_ps(scale);
    for (int r = 0; r < kRows; ++r) {
      const float* xb = x + r * k + b * kBlock;
      __m512 t = _mm512_mul_ps(q[0], _mm512_loadu_ps(xb));
      t = _mm512_fmadd_ps(q[1], _mm512_loadu_ps(xb + 16), t);
      acc[r] = _mm512_fmadd_ps(scale_v, t, acc[r]);
      if constexpr (Block::kHasMin) min_acc[r] += min * sums[r * num_blocks + b];
    }
  }
  for (int r = 0; r < kRows; ++r) y[r * ldy] = _mm512_reduce_add_ps(acc[r]) + min_acc[r];
}

template <typename Block>
void matmul_direct_typed(const float* x, std::int64_t m, std::int64_t k, const float* sums,
                         const std::uint8_t* w, std::size_t w_stride, std::int64_t n_begin,
                         std::int64_t n_end, float* y, std::int64_t ldy) {
  const std::int64_t num_blocks = k / kBlock;
  for (std::int64_t m0 = 0; m0 < m; m0 += kRowTile) {
    const std::int64_t rows = m - m0 < kRowTile ? m - m0 : kRowTile;
    const float* xt = x + m0 * k;
    const float* st = sums + m0 * num_blocks;
    for (std::int64_t n = n_begin; n < n_end; ++n) {
      const std::uint8_t* w_row = w + static_cast<std::size_t>(n) * w_stride;
      float* yt = y + m0 * ldy + n;
      switch (rows) {
        case 1: dot_weight_row<Block, 1>(xt, k, st, w_row, yt, ldy); break;
        case 2: dot_weight_row<Block, 2>(xt, k, st, w_row, yt, ldy); break;
        case 3: dot_weight_row<Block, 3>(xt, k, st, w_row, yt, ldy); break;
        default: dot_weight_row<Block, 4>(xt, k, st, w_row, yt, ldy); break;
      }
    }
  }
}

// The four horizontal sums of v[0..3] at once: halves added, then three hadds instead of four
// full reductions (these run once per output, against K/16 FMAs).
inline __m128 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  const __m512 v[4] = {v0, v1, v2, v3};
  __m256 h[4];
  for (int j = 0; j < 4; ++j) {
    const __m512d wide = _mm512_castps_pd(v[j]);
    h[j] = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(wide, 0)),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(wide, 1)));
  }
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// kRows rows of x against the kRowGroup decoded weight rows: kRows x 4 accumulators + 4 weight
// vectors + 1 x vector (29 zmm registers at kRows = 6). Each weight vector loaded serves kRows
// rows of x, and each weight was decoded once for all of them.
template <int kRows>
void dot_tile(const float* x, std::int64_t k, const float* rows, float* y, std::int64_t ldy,
              std::int64_t num_rows) {
  // Every loop over acc is unrolled: one left rolled makes GCC 12 keep the array on the stack and
  // store all 16 accumulators on every step (2x slower).
  __m512 acc[kRows][kRowGroup];
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRowGroup; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  // Masked loads cost what plain ones do, so the last partial step needs no separate loop.
  for (std::int64_t i = 0; i < k; i += 16) {
    const __mmask16 mask =
        i + 16 <= k ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[kRowGroup];
#pragma GCC unroll 4
    for (int j = 0; j < kRowGroup; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, rows + j * k + i);
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + r * k + i);
#pragma GCC unroll 4
      for (int j = 0; j < kRowGroup; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) {
    const __m128 sums = reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    if (num_rows == kRowGroup) {
      _mm_storeu_ps(y + r * ldy, sums);
    } else {
      alignas(16) float lanes[kRowGroup];
      _mm_store_ps(lanes, sums);
      for (std::int64_t j = 0; j < num_rows; ++j) y[r * ldy + j] = lanes[j];
    }
  }
}

template <typename Block>
void decode_typed(const std::uint8_t* src, std::int64_t count, float* dst) {
  const std::int64_t num_blocks = count / kBlock;
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    decode_block<Block>(src + b * Block::kBytes, dst + b * kBlock);
  }
}

}  // namespace

void dot_rows(const float* x, std::int64_t m, std::int64_t k, const float* rows,
              std::int64_t num_rows, float* y, std::int64_t ldy) {
  for (std::int64_t m0 = 0; m0 < m; m0 += kDotRowTile) {
    const float* xt = x + m0 * k;
    float* yt = y + m0 * ldy;
    switch (m - m0 < kDotRowTile ? m - m0 : kDotRowTile) {
      case 1: dot_tile<1>(xt, k, rows, yt, ldy, num_rows); break;
      case 2: dot_tile<2>(xt, k, rows, yt, ldy, num_rows); break;
      case 3: dot_tile<3>(xt, k, rows, yt, ldy, num_rows); break;
      case 4: dot_tile<4>(xt, k, rows, yt, ldy, num_rows); break;
      case 5: dot_tile<5>(xt, k, rows, yt, ldy, num_rows); break;
      default: dot_tile<6>(xt, k, rows, yt, ldy, num_rows); break;
    }
  }
}

void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst) {
  switch (dtype) {
    case DType::kQ4_0: return decode_typed<Q4_0Block>(src, count, dst);
    case DType::kQ4_1: return decode_typed<Q4_1Block>(src, count, dst);
    default: return decode_typed<Q8_0Block>(src, count, dst);
  }
}

void matmul_direct(DType dtype, const float* x, std::int64_t m, std::int64_t k,
                   const float* x_block_sums, const std::uint8_t* w, std::size_t w_stride,
                   std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t ldy) {
  switch (dtype) {
    case DType::kQ4_0:
      return matmul_direct_typed<Q4_0Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    case DType::kQ4_1:
      return matmul_direct_typed<Q4_1Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    default:
      return matmul_direct_typed<Q8_0Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
  }
}

}  // namespace pagoda::cpu::avx512
