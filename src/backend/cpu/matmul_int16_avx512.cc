#include "backend/cpu/matmul_int16_avx512.h"

#include <immintrin.h>

#include <limits>

#include "backend/cpu/weight_blocks_avx512.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

void quantize_columns_int16(const float* xt, std::int64_t k, std::int64_t vectors,
                            std::int32_t* pairs, float* scales, float* scaled_sums) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const std::int64_t width = 16 * vectors;
  const __m512 int16_max = _mm512_set1_ps(32767.0f);
  const __m512 float_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  const __m512i low_half = _mm512_set1_epi32(0xFFFF);
  for (std::int64_t b = 0; b < k / kInt16Block; ++b) {
    for (std::int64_t v = 0; v < vectors; ++v) {
      const float* column = xt + b * kInt16Block * width + v * 16;
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
      const __m512 to_int = _mm512_maskz_div_ps(scaled, int16_max, amax);
      const __m512 s = _mm512_mask_blend_ps(non_finite, _mm512_div_ps(amax, int16_max), nan);
      __m512i qsum = _mm512_setzero_si512();
      std::int32_t* out = pairs + b * (kInt16Block / 2) * width + v * 16;
      for (int p = 0; p < kInt16Block / 2; ++p) {
        // cvtps rounds to nearest even (MXCSR default); |x * to_int| <= 32767.
        const __m512i q0 =
            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(column + 2 * p * width), to_int));
        const __m512i q1 = _mm512_cvtps_epi32(
            _mm512_mul_ps(_mm512_loadu_ps(column + (2 * p + 1) * width), to_int));
        qsum = _mm512_add_epi32(qsum, _mm512_add_epi32(q0, q1));
        _mm512_storeu_si512(out + p * width, _mm512_or_si512(_mm512_and_si512(q0, low_half),
                                                             _mm512_slli_epi32(q1, 16)));
      }
      _mm512_storeu_ps(scales + b * width + v * 16, s);
      _mm512_storeu_ps(scaled_sums + b * width + v * 16,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(qsum), s));
    }
  }
}

namespace {

// Per 32-column block: 16 column pairs, each kVectors loads of x and kRows x kVectors
// vpdpwssd whose weight pair is an embedded broadcast; the first pair uses vpmaddwd, so the
// block sums start without a zeroing. Between pairs the next block's rows are decoded into the
// other buffer, one row every 16 / kRows pairs. Then each block sum joins its fp32 accumulator.
template <typename Block, int kVectors>
void int16_tile_typed(const std::int32_t* pairs, const float* scales, const float* scaled_sums,
                      std::int64_t k, const std::uint8_t* w, std::size_t w_stride,
                      std::int64_t num_rows, const std::uint8_t* next, std::int64_t next_rows,
                      float* acc) {
  constexpr int kRows = static_cast<int>(int16_tile_rows(kVectors));
  constexpr int kWidth = 16 * kVectors;
  constexpr int kPairs = kInt16Block / 2;
  const std::int64_t num_blocks = k / kInt16Block;
  // Rows past num_rows stay zero: their sums are finite and dropped by the caller.
  alignas(64) std::int32_t quants[2][kRows][kPairs] = {};
  float scale[2][kRows] = {};
  float min[2][kRows] = {};
  for (std::int64_t r = 0; r < num_rows; ++r) {
    decode_block_int16<Block>(w + r * w_stride, quants[0][r], scale[0][r], min[0][r]);
  }
  __m512 a[kRows][kVectors];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_loadu_ps(acc + r * kWidth + v * 16);
  }
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const int current = static_cast<int>(b & 1);
    const int following = current ^ 1;
    const bool has_following = b + 1 < num_blocks;
    const std::size_t following_offset = static_cast<std::size_t>(b + 1) * Block::kBytes;
    if (next != nullptr) {
      for (std::int64_t r = 0; r < next_rows; ++r) {
        __builtin_prefetch(next + r * w_stride + b * Block::kBytes, /*rw=*/0, /*locality=*/3);
      }
    }
    const std::int32_t* xb = pairs + b * kPairs * kWidth;
    __m512i sums[kRows][kVectors];
#pragma GCC unroll 16
    for (int p = 0; p < kPairs; ++p) {
      __m512i xv[kVectors];
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) xv[v] = _mm512_loadu_si512(xb + p * kWidth + v * 16);
#pragma GCC unroll 12
      for (int r = 0; r < kRows; ++r) {
        const __m512i wv = _mm512_set1_epi32(quants[current][r][p]);
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) {
          sums[r][v] =
              p == 0 ? _mm512_madd_epi16(xv[v], wv) : _mm512_dpwssd_epi32(sums[r][v], xv[v], wv);
        }
      }
#pragma GCC unroll 12
      for (int r = 0; r < kRows; ++r) {
        if (r * kPairs / kRows == p && has_following && r < num_rows) {
          decode_block_int16<Block>(w + r * w_stride + following_offset, quants[following][r],
                                    scale[following][r], min[following][r]);
        }
      }
    }
    __m512 s[kVectors];
    __m512 qs[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      s[v] = _mm512_loadu_ps(scales + b * kWidth + v * 16);
      if constexpr (Block::kHasMin) qs[v] = _mm512_loadu_ps(scaled_sums + b * kWidth + v * 16);
    }
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const __m512 d = _mm512_set1_ps(scale[current][r]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
        a[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r][v]), _mm512_mul_ps(d, s[v]), a[r][v]);
        if constexpr (Block::kHasMin) {
          a[r][v] = _mm512_fmadd_ps(_mm512_set1_ps(min[current][r]), qs[v], a[r][v]);
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

template <typename Block>
void int16_tile_block_type(const std::int32_t* pairs, const float* scales, const float* scaled_sums,
                           std::int64_t vectors, std::int64_t k, const std::uint8_t* w,
                           std::size_t w_stride, std::int64_t num_rows, const std::uint8_t* next,
                           std::int64_t next_rows, float* acc) {
  switch (vectors) {
    case 1:
      return int16_tile_typed<Block, 1>(pairs, scales, scaled_sums, k, w, w_stride, num_rows, next,
                                        next_rows, acc);
    case 2:
      return int16_tile_typed<Block, 2>(pairs, scales, scaled_sums, k, w, w_stride, num_rows, next,
                                        next_rows, acc);
    case 3:
      return int16_tile_typed<Block, 3>(pairs, scales, scaled_sums, k, w, w_stride, num_rows, next,
                                        next_rows, acc);
    default:
      return int16_tile_typed<Block, 4>(pairs, scales, scaled_sums, k, w, w_stride, num_rows, next,
                                        next_rows, acc);
  }
}

}  // namespace

void int16_tile(DType dtype, const std::int32_t* pairs, const float* scales,
                const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
                const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  switch (dtype) {
    case DType::kQ4_0:
      return int16_tile_block_type<Q4_0Block>(pairs, scales, scaled_sums, vectors, k, w, w_stride,
                                              num_rows, next, next_rows, acc);
    case DType::kQ4_1:
      return int16_tile_block_type<Q4_1Block>(pairs, scales, scaled_sums, vectors, k, w, w_stride,
                                              num_rows, next, next_rows, acc);
    default:
      PAGODA_CHECK(dtype == DType::kQ8_0) << dtype_name(dtype);
      return int16_tile_block_type<Q8_0Block>(pairs, scales, scaled_sums, vectors, k, w, w_stride,
                                              num_rows, next, next_rows, acc);
  }
}

}  // namespace pagoda::cpu::avx512
