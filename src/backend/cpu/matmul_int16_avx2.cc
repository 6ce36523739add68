#include "backend/cpu/matmul_int16_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/avxvnni_region.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_tile_rows.h"
#include "backend/cpu/int16_tile_rows_avx2.h"
#include "common/check.h"

namespace pagoda::cpu::avx2 {

namespace {

// Maximum of the 8 lanes (exact in any order).
inline float max_lanes(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// Sum of the 8 int32 lanes (exact, wrapping as the AVX-512 reduction does).
inline std::int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 int32 (two vectors) as 16 int16 in order, keeping the low 16 bits (vpmovdw's truncation:
// the same q as the AVX-512 kernels even for the garbage of a non-finite block).
inline __m256i low_halves_16(__m256i a, __m256i b) {
  const __m256i mask = _mm256_set1_epi32(0xFFFF);
  return _mm256_permute4x64_epi64(
      _mm256_packus_epi32(_mm256_and_si256(a, mask), _mm256_and_si256(b, mask)),
      _MM_SHUFFLE(3, 1, 2, 0));
}

}  // namespace

void quantize_rows_int16(const float* x, std::int64_t m, std::int64_t k, std::int16_t* q,
                         float* scales, float* scaled_sums, std::int32_t* qsums) {
  quantize_rows_to(cpu_activation_code_max(), x, m, k, q, scales, scaled_sums, qsums);
}

void quantize_rows_to(float code_max, const float* x, std::int64_t m, std::int64_t k,
                      std::int16_t* q, float* scales, float* scaled_sums, std::int32_t* qsums) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const std::int64_t num_blocks = k / kInt16Block;
  const __m256 float_max = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // The same fp32 operations as avx512::quantize_rows_int16 (max is exact in any order).
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      const float* xb = x + i * k + b * kInt16Block;
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      int non_finite = 0;
      for (int c = 0; c < 4; ++c) {
        v[c] = _mm256_loadu_ps(xb + 8 * c);
        const __m256 magnitude = _mm256_andnot_ps(sign, v[c]);
        amax = _mm256_max_ps(amax, magnitude);
        // Not <= FLT_MAX: infinite or NaN.
        non_finite |= _mm256_movemask_ps(_mm256_cmp_ps(magnitude, float_max, _CMP_NLE_UQ));
      }
      const float block_max = max_lanes(amax);
      const float s =
          non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : block_max / code_max;
      const __m256 to_int =
          _mm256_set1_ps(non_finite == 0 && block_max > 0.0f ? code_max / block_max : 0.0f);
      __m256i qi[4];
      // cvtps rounds to nearest even (MXCSR default); |x * to_int| <= code max.
      for (int c = 0; c < 4; ++c) qi[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], to_int));
      std::int16_t* out = q + i * k + b * kInt16Block;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), low_halves_16(qi[0], qi[1]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), low_halves_16(qi[2], qi[3]));
      const std::int32_t qsum = sum_lanes(
          _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
      const std::size_t at = static_cast<std::size_t>(i * num_blocks + b);
      scales[at] = s;
      scaled_sums[at] = static_cast<float>(qsum) * s;
      qsums[at] = qsum;
    }
  }
}

void quantize_columns_int16(const float* x, std::int64_t m, std::int64_t k, std::int64_t vectors,
                            std::int32_t* pairs, float* scales, float* scaled_sums) {
  PAGODA_CHECK(m >= 1 && m <= kInt16Lanes * vectors) << m << " rows in " << vectors << " vectors";
  const std::int64_t width = kInt16Lanes * vectors;
  // Row by row (the same q, s and sums as quantize_rows_int16), then transposed.
  const std::int16_t* q =
      quantize_rows_scratch(cpu_activation_code_max(), x, m, k, width, scales, scaled_sums);
  std::fill(pairs, pairs + k / 2 * width, 0);
  for (std::int64_t l = 0; l < m; ++l) {
    const std::int16_t* row = q + l * k;
    for (std::int64_t p = 0; p < k / 2; ++p) {
      std::int32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));
      pairs[p * width + l] = pair;
    }
  }
}

const std::int16_t* quantize_rows_scratch(float code_max, const float* x, std::int64_t m,
                                          std::int64_t k, std::int64_t width, float* scales,
                                          float* scaled_sums) {
  const std::int64_t num_blocks = k / kInt16Block;
  thread_local std::vector<std::int16_t> q;
  thread_local std::vector<float> row_scales;
  thread_local std::vector<float> row_sums;
  thread_local std::vector<std::int32_t> qsums;
  q.resize(static_cast<std::size_t>(m * k));
  row_scales.resize(static_cast<std::size_t>(m * num_blocks));
  row_sums.resize(row_scales.size());
  qsums.resize(row_scales.size());
  quantize_rows_to(code_max, x, m, k, q.data(), row_scales.data(), row_sums.data(), qsums.data());
  std::fill(scales, scales + num_blocks * width, 0.0f);
  std::fill(scaled_sums, scaled_sums + num_blocks * width, 0.0f);
  for (std::int64_t l = 0; l < m; ++l) {
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      scales[b * width + l] = row_scales[static_cast<std::size_t>(l * num_blocks + b)];
      scaled_sums[b * width + l] = row_sums[static_cast<std::size_t>(l * num_blocks + b)];
    }
  }
  return q.data();
}

namespace {

using int16::with_int16_block;

// 32 signed bytes as 32 int16 at `out`.
inline void store_widened(__m256i q, std::int16_t* out) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out + 16),
                     _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)));
}

// p[r] (8 int32 lanes, weight row r's pair products) summed per row: lane r of the result is
// row r's sum. Two levels of hadd within 128-bit halves, then the halves added.
inline __m256i sum_rows(const __m256i p[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// The kernels twice: plain AVX2, and with AVX-VNNI's VEX vpdpwssd (Alder Lake, Sapphire Rapids,
// Zen 5), which gives the same integers as vpmaddwd + vpaddd in one instruction.
namespace plain {
#define PAGODA_INT16_DOT_ADD(acc, x, w) _mm256_add_epi32(acc, _mm256_madd_epi16(x, w))
#include "backend/cpu/matmul_int16_avx2_kernels.inc"
#undef PAGODA_INT16_DOT_ADD
}  // namespace plain

PAGODA_AVXVNNI_BEGIN
namespace vnni {
#define PAGODA_INT16_DOT_ADD(acc, x, w) _mm256_dpwssd_avx_epi32(acc, x, w)
#include "backend/cpu/matmul_int16_avx2_kernels.inc"
#undef PAGODA_INT16_DOT_ADD
}  // namespace vnni
PAGODA_AVXVNNI_END

}  // namespace

void int16_direct(DType dtype, const std::int16_t* q, const float* scales, const float* scaled_sums,
                  std::int64_t m, std::int64_t k, const std::uint8_t* w, std::size_t w_stride,
                  std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t ldy) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    const bool vnni = cpu_int16_avx_vnni();
    int16::with_row_count<kInt16DirectMaxRows>(m, [&](auto rows) {
      int16::for_each_lane_group<kInt16DirectGroup>(
          w, w_stride, n_begin, n_end,
          [&](const std::uint8_t* group, std::int64_t n, int count, std::int64_t lane_stride,
              bool last) {
            constexpr int kRows = decltype(rows)::value;
            auto* kernel = vnni ? vnni::int16_direct_group<Block, kRows>
                                : plain::int16_direct_group<Block, kRows>;
            kernel(q, scales, scaled_sums, k, group, w_stride, count, lane_stride, last, y + n,
                   ldy);
          });
    });
  });
}

void int16_tile(DType dtype, const std::int32_t* pairs, const float* scales,
                const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
                const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    const bool vnni = cpu_int16_avx_vnni();
    const auto run = [&](auto vectors_constant) {
      constexpr int kVectors = decltype(vectors_constant)::value;
      constexpr int kRows = static_cast<int>(int16_tile_rows(kVectors));
      const int16::RowMajorTile<Block, kRows, Avx2Tiles> rows(w, w_stride, num_rows, next,
                                                              next_rows);
      auto* kernel = vnni ? vnni::int16_tile_typed<Block, kVectors, kRows, decltype(rows)>
                          : plain::int16_tile_typed<Block, kVectors, kRows, decltype(rows)>;
      kernel(pairs, scales, scaled_sums, k, rows, acc);
    };
    if (vectors == 1) return run(std::integral_constant<int, 1>{});
    PAGODA_CHECK_EQ(vectors, 2) << "int16_tile takes up to " << kInt16PieceRows << " rows";
    run(std::integral_constant<int, 2>{});
  });
}

void int16_tile_interleaved(DType dtype, const std::int32_t* pairs, const float* scales,
                            const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                            const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                            std::int64_t num_rows, float* acc) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    if constexpr (int16::kInterleaves<Block>) {
      int16::check_whole_groups<Block, kInt16Block>(k);
      PAGODA_CHECK(vectors == 1 || vectors == 2)
          << "int16_tile_interleaved takes up to " << kInt16PieceRows << " rows";
      PAGODA_CHECK_LE(num_rows, int16_panel_tile_rows(vectors));
      const int16::PanelTile<Block, Avx2Tiles> rows(panels, row_bytes, n0, num_rows);
      const bool vnni = cpu_int16_avx_vnni();
      const auto run = [&](auto vectors_constant, auto rows_constant) {
        constexpr int kVectors = decltype(vectors_constant)::value;
        constexpr int kRows = decltype(rows_constant)::value;
        auto* kernel = vnni ? vnni::int16_tile_typed<Block, kVectors, kRows, decltype(rows)>
                            : plain::int16_tile_typed<Block, kVectors, kRows, decltype(rows)>;
        kernel(pairs, scales, scaled_sums, k, rows, acc);
      };
      if (vectors == 1)
        return run(std::integral_constant<int, 1>{}, std::integral_constant<int, 8>{});
      // A panel's third tile of two vectors has 4 rows: no work on 2 rows that are not there.
      if (num_rows <= 4) {
        return run(std::integral_constant<int, 2>{}, std::integral_constant<int, 4>{});
      }
      run(std::integral_constant<int, 2>{}, std::integral_constant<int, 6>{});
    } else {
      PAGODA_CHECK(false) << "no interleaved layout of " << dtype_name(dtype);
    }
  });
}

}  // namespace pagoda::cpu::avx2
