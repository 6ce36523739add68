#include "backend/cpu/matmul_int16_avx512.h"

#include <immintrin.h>

#include <algorithm>
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

void quantize_rows_int16(const float* x, std::int64_t m, std::int64_t k, std::int16_t* q,
                         float* scales, float* scaled_sums, std::int32_t* qsums) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const std::int64_t num_blocks = k / kInt16Block;
  const __m512 float_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  // The same fp32 operations as quantize_columns_int16, one block's 32 columns at a time.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      const float* xb = x + i * k + b * kInt16Block;
      const __m512 lo = _mm512_loadu_ps(xb);
      const __m512 hi = _mm512_loadu_ps(xb + 16);
      const __m512 mag_lo = _mm512_abs_ps(lo);
      const __m512 mag_hi = _mm512_abs_ps(hi);
      const bool non_finite = (_mm512_cmp_ps_mask(mag_lo, float_max, _CMP_NLE_UQ) |
                               _mm512_cmp_ps_mask(mag_hi, float_max, _CMP_NLE_UQ)) != 0;
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(mag_lo, mag_hi));
      const float s = non_finite ? std::numeric_limits<float>::quiet_NaN() : amax / 32767.0f;
      const __m512 to_int = _mm512_set1_ps(!non_finite && amax > 0.0f ? 32767.0f / amax : 0.0f);
      const __m512i q_lo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, to_int));
      const __m512i q_hi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, to_int));
      std::int16_t* out = q + i * k + b * kInt16Block;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(q_lo));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm512_cvtepi32_epi16(q_hi));
      const std::int32_t qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
      const std::size_t at = static_cast<std::size_t>(i * num_blocks + b);
      scales[at] = s;
      scaled_sums[at] = static_cast<float>(qsum) * s;
      qsums[at] = qsum;
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
    default:
      PAGODA_CHECK_EQ(vectors, 2) << "int16_tile takes up to " << kInt16PieceRows << " rows";
      return int16_tile_typed<Block, 2>(pairs, scales, scaled_sums, k, w, w_stride, num_rows, next,
                                        next_rows, acc);
  }
}

// int16_direct's weight row in lane slot s: the reduction tree below leaves slot s's sum in
// lane slot_row(s), so row r goes to slot slot_row(r) (the map is its own inverse).
constexpr int slot_row(int s) {
  return (s % 4) * 4 + s / 4;
}

// Sums a pair of 16-lane vectors to 8 + 8 lanes, then two such to 4 + 4 + 4 + 4 lanes: lane
// quarter j of the result holds 4 partial sums of the j-th of the four inputs p0, p1, p2, p3.
inline __m512i sum_quad(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
  const __m512i a =
      _mm512_add_epi32(_mm512_shuffle_i64x2(p0, p1, 0x44), _mm512_shuffle_i64x2(p0, p1, 0xEE));
  const __m512i b =
      _mm512_add_epi32(_mm512_shuffle_i64x2(p2, p3, 0x44), _mm512_shuffle_i64x2(p2, p3, 0xEE));
  return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x88), _mm512_shuffle_i64x2(a, b, 0xDD));
}

// Four sum_quad results (slots 0-3, 4-7, 8-11, 12-15) to one vector whose lane 4 L + t holds the
// whole sum of slot 4 t + L.
inline __m512i sum_quads(__m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  const __m512i c0 = _mm512_add_epi32(_mm512_unpacklo_epi64(q0, q1), _mm512_unpackhi_epi64(q0, q1));
  const __m512i c1 = _mm512_add_epi32(_mm512_unpacklo_epi64(q2, q3), _mm512_unpackhi_epi64(q2, q3));
  const __m512 f0 = _mm512_castsi512_ps(c0);
  const __m512 f1 = _mm512_castsi512_ps(c1);
  return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(3, 1, 3, 1))));
}

// One group of up to 16 weight rows against kRows rows of x. Per block: each row's 32 quants as
// int16, one vpmaddwd per row of x, the 16 products summed lane-wise (lane r: row r's exact block
// dot), then the block joins the fp32 accumulators exactly as in int16_tile.
template <typename Block, int kRows>
void int16_direct_group(const std::int16_t* q, const float* scales, const float* scaled_sums,
                        const std::int32_t* qsums, std::int64_t k, const std::uint8_t* w,
                        std::size_t w_stride, int count, const std::uint8_t* next, float* y,
                        std::int64_t ldy) {
  const std::int64_t num_blocks = k / kInt16Block;
  // Lanes past `count` read the last row again; their sums are not stored.
  const std::uint8_t* rows[kInt16DirectGroup];
  alignas(64) std::int32_t offsets[kInt16DirectGroup];
  for (int r = 0; r < kInt16DirectGroup; ++r) {
    const std::size_t offset = static_cast<std::size_t>(std::min(r, count - 1)) * w_stride;
    rows[r] = w + offset;
    offsets[r] = static_cast<std::int32_t>(offset);
  }
  const __m512i header_offsets = _mm512_load_si512(offsets);
  __m512 acc[kRows];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const std::size_t at = static_cast<std::size_t>(b) * Block::kBytes;
    if (next != nullptr) {
#pragma GCC unroll 16
      for (int r = 0; r < kInt16DirectGroup; ++r) {
        __builtin_prefetch(next + r * w_stride + at, /*rw=*/0, /*locality=*/3);
      }
    }
    // All 16 rows' quants stay in registers while each row of x passes over them.
    __m512i wq[kInt16DirectGroup];
#pragma GCC unroll 16
    for (int s = 0; s < kInt16DirectGroup; ++s) {
      wq[s] = block_quants_epi16<Block>(rows[slot_row(s)] + at);
    }
    // Each row's fp16 scale (and Q4_1's fp16 min above it) in one gather.
    const __m512i header = _mm512_i32gather_epi32(header_offsets, w + at, 1);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(header));
    const __m512 min = Block::kHasMin
                           ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(header, 16)))
                           : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
      const __m512i xv = _mm512_loadu_si512(q + i * k + b * kInt16Block);
      __m512i quads[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        quads[j] =
            sum_quad(_mm512_madd_epi16(wq[4 * j], xv), _mm512_madd_epi16(wq[4 * j + 1], xv),
                     _mm512_madd_epi16(wq[4 * j + 2], xv), _mm512_madd_epi16(wq[4 * j + 3], xv));
      }
      __m512i dot = sum_quads(quads[0], quads[1], quads[2], quads[3]);
      // Q4_0's quants were taken without their offset of 8.
      if constexpr (Block::kOffset != 0) {
        dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(static_cast<std::int32_t>(
                                        static_cast<std::uint32_t>(qsums[xb]) * Block::kOffset)));
      }
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                               _mm512_mul_ps(d, _mm512_set1_ps(scales[xb])), acc[i]);
      if constexpr (Block::kHasMin) {
        acc[i] = _mm512_fmadd_ps(min, _mm512_set1_ps(scaled_sums[xb]), acc[i]);
      }
    }
  }
  const auto lanes = static_cast<__mmask16>((1u << count) - 1);
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(y + i * ldy, lanes, acc[i]);
}

template <typename Block, int kRows>
void int16_direct_typed(const std::int16_t* q, const float* scales, const float* scaled_sums,
                        const std::int32_t* qsums, std::int64_t k, const std::uint8_t* w,
                        std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end, float* y,
                        std::int64_t ldy) {
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += kInt16DirectGroup) {
    const int count = static_cast<int>(std::min(kInt16DirectGroup, n_end - n0));
    const std::uint8_t* group = w + static_cast<std::size_t>(n0) * w_stride;
    const std::uint8_t* next =
        n0 + 2 * kInt16DirectGroup <= n_end ? group + kInt16DirectGroup * w_stride : nullptr;
    int16_direct_group<Block, kRows>(q, scales, scaled_sums, qsums, k, group, w_stride, count, next,
                                     y + n0, ldy);
  }
}

// m as a template argument: the rows' accumulators then live in registers.
template <typename Block, int kRows = 1>
void int16_direct_block_type(const std::int16_t* q, const float* scales, const float* scaled_sums,
                             const std::int32_t* qsums, std::int64_t m, std::int64_t k,
                             const std::uint8_t* w, std::size_t w_stride, std::int64_t n_begin,
                             std::int64_t n_end, float* y, std::int64_t ldy) {
  if constexpr (kRows < kInt16DirectMaxRows) {
    if (m > kRows) {
      return int16_direct_block_type<Block, kRows + 1>(q, scales, scaled_sums, qsums, m, k, w,
                                                       w_stride, n_begin, n_end, y, ldy);
    }
  }
  PAGODA_CHECK(m == kRows) << "int16_direct takes 1 to " << kInt16DirectMaxRows << " rows, not "
                           << m;
  int16_direct_typed<Block, kRows>(q, scales, scaled_sums, qsums, k, w, w_stride, n_begin, n_end, y,
                                   ldy);
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

void int16_direct(DType dtype, const std::int16_t* q, const float* scales, const float* scaled_sums,
                  const std::int32_t* qsums, std::int64_t m, std::int64_t k, const std::uint8_t* w,
                  std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end, float* y,
                  std::int64_t ldy) {
  switch (dtype) {
    case DType::kQ4_0:
      return int16_direct_block_type<Q4_0Block>(q, scales, scaled_sums, qsums, m, k, w, w_stride,
                                                n_begin, n_end, y, ldy);
    case DType::kQ4_1:
      return int16_direct_block_type<Q4_1Block>(q, scales, scaled_sums, qsums, m, k, w, w_stride,
                                                n_begin, n_end, y, ldy);
    default:
      PAGODA_CHECK(dtype == DType::kQ8_0) << dtype_name(dtype);
      return int16_direct_block_type<Q8_0Block>(q, scales, scaled_sums, qsums, m, k, w, w_stride,
                                                n_begin, n_end, y, ldy);
  }
}

}  // namespace pagoda::cpu::avx512
