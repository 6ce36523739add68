#include "backend/cpu/matmul_avx2.h"

#include <immintrin.h>

#include "backend/cpu/weight_blocks_avx2.h"

namespace pagoda::cpu::avx2 {

namespace {

constexpr int kBlock = 32;
// Rows of x that share one decode of a weight block; 4 rows x 1 accumulator plus 4 decoded
// vectors and temporaries stay within the 16 ymm registers.
constexpr int kRowTile = 4;

// Dot products of kRows rows of x with one weight row. Per block the quants are multiplied with
// x first and the block scale applied once to that partial sum:
//
//   sum_j (d*q_j + m) * x_j  =  d * (sum_j q_j*x_j)  +  m * (sum_j x_j)
//
// so each block's q·x chain is independent of the others and only one FMA per block lands on
// the loop-carried accumulator (latency is hidden even for a single row of x).
template <typename Block, int kRows>
void dot_weight_row(const float* x, std::int64_t k, const float* sums, std::int64_t num_blocks,
                    const std::uint8_t* w_row, float* y, std::int64_t ldy) {
  __m256 acc[kRows];
  float min_acc[kRows];
  for (int r = 0; r < kRows; ++r) {
    acc[r] = _mm256_setzero_ps();
    min_acc[r] = 0.0f;
  }
  const std::int64_t full_blocks = k / kBlock;
  for (std::int64_t b = 0; b < full_blocks; ++b) {
    __m256 q[4];
    float scale, min;
    Block::decode(w_row + b * Block::kBytes, q, scale, min);
    const __m256 scale_v = _mm256_set1_ps(scale);
    for (int r = 0; r < kRows; ++r) {
      const float* xb = x + r * k + b * kBlock;
      __m256 t = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
      t = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xb + 8), t);
      t = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xb + 16), t);
      t = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), t);
      if constexpr (Block::kScaled) {
        acc[r] = _mm256_fmadd_ps(scale_v, t, acc[r]);
      } else {
        acc[r] = _mm256_add_ps(acc[r], t);
      }
      if constexpr (Block::kHasMin) min_acc[r] += min * sums[r * num_blocks + b];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    float total = horizontal_sum(acc[r]) + min_acc[r];
    if constexpr (!Block::kScaled) {
      // Only plain float rows may end in a partial block.
      for (std::int64_t i = full_blocks * kBlock; i < k; ++i) {
        total += Block::element(w_row, i) * x[r * k + i];
      }
    }
    y[r * ldy] = total;
  }
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
        case 1: dot_weight_row<Block, 1>(xt, k, st, num_blocks, w_row, yt, ldy); break;
        case 2: dot_weight_row<Block, 2>(xt, k, st, num_blocks, w_row, yt, ldy); break;
        case 3: dot_weight_row<Block, 3>(xt, k, st, num_blocks, w_row, yt, ldy); break;
        default: dot_weight_row<Block, 4>(xt, k, st, num_blocks, w_row, yt, ldy); break;
      }
    }
  }
}

// Weight = scale * q + min, rounded as the reference does (multiply, then add; this file is
// compiled with -ffp-contract=off so the two stay separate roundings).
template <typename Block>
void decode_typed(const std::uint8_t* src, std::int64_t count, float* dst) {
  const std::int64_t full_blocks = count / kBlock;
  for (std::int64_t b = 0; b < full_blocks; ++b) {
    __m256 q[4];
    float scale, min;
    Block::decode(src + b * Block::kBytes, q, scale, min);
    for (int i = 0; i < 4; ++i) {
      __m256 v = q[i];
      if constexpr (Block::kScaled) v = _mm256_mul_ps(_mm256_set1_ps(scale), v);
      if constexpr (Block::kHasMin) v = _mm256_add_ps(v, _mm256_set1_ps(min));
      _mm256_storeu_ps(dst + b * kBlock + 8 * i, v);
    }
  }
  if constexpr (!Block::kScaled) {
    for (std::int64_t i = full_blocks * kBlock; i < count; ++i) dst[i] = Block::element(src, i);
  }
}

// The register tile of gemm_packed: kRows rows of x times 16 panel columns, 2 * kRows
// accumulators (12 for 6 rows) + 2 panel vectors + 1 broadcast = 15 ymm registers.
//
//            panel [kc, 16]
//            k -> +--------+--------+
//                 | b0 (8) | b1 (8) |
//   x [kRows, kc] +--------+--------+
//   row r: x[r,k] | c[r][0]| c[r][1]|   c[r][j] += x[r, k] * b_j
template <int kRows>
void gemm_tile(const float* x, std::int64_t ldx, const float* panel, std::int64_t kc,
               float* tile /* [kRows, 16] */) {
  __m256 c[kRows][2];
  for (int r = 0; r < kRows; ++r) c[r][0] = c[r][1] = _mm256_setzero_ps();
  for (std::int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(panel + kk * kPanelCols);
    const __m256 b1 = _mm256_loadu_ps(panel + kk * kPanelCols + 8);
    for (int r = 0; r < kRows; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * ldx + kk);
      c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_ps(tile + r * kPanelCols, c[r][0]);
    _mm256_storeu_ps(tile + r * kPanelCols + 8, c[r][1]);
  }
}

constexpr int kGemmRows = 6;

}  // namespace

void matmul_direct(DType dtype, const float* x, std::int64_t m, std::int64_t k,
                   const float* x_block_sums, const std::uint8_t* w, std::size_t w_stride,
                   std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t ldy) {
  switch (dtype) {
    case DType::kQ8_0:
      return matmul_direct_typed<Q8_0Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    case DType::kQ4_0:
      return matmul_direct_typed<Q4_0Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    case DType::kQ4_1:
      return matmul_direct_typed<Q4_1Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    case DType::kF16:
      return matmul_direct_typed<F16Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                           ldy);
    case DType::kBF16:
      return matmul_direct_typed<BF16Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                            ldy);
    default:
      return matmul_direct_typed<F32Block>(x, m, k, x_block_sums, w, w_stride, n_begin, n_end, y,
                                           ldy);
  }
}

void block_sums(const float* x, std::int64_t m, std::int64_t k, float* sums) {
  const std::int64_t num_blocks = k / kBlock;
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      const float* xb = x + r * k + b * kBlock;
      const __m256 s =
          _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8)),
                        _mm256_add_ps(_mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)));
      sums[r * num_blocks + b] = horizontal_sum(s);
    }
  }
}

void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst) {
  switch (dtype) {
    case DType::kQ8_0: return decode_typed<Q8_0Block>(src, count, dst);
    case DType::kQ4_0: return decode_typed<Q4_0Block>(src, count, dst);
    case DType::kQ4_1: return decode_typed<Q4_1Block>(src, count, dst);
    case DType::kF16: return decode_typed<F16Block>(src, count, dst);
    case DType::kBF16: return decode_typed<BF16Block>(src, count, dst);
    default: return decode_typed<F32Block>(src, count, dst);
  }
}

void gemm_packed(const float* x, std::int64_t m, std::int64_t ldx, const float* panel,
                 std::int64_t kc, float* y, std::int64_t ldy, std::int64_t num_cols,
                 bool accumulate) {
  alignas(32) float tile[kGemmRows * kPanelCols];
  for (std::int64_t m0 = 0; m0 < m; m0 += kGemmRows) {
    const std::int64_t rows = m - m0 < kGemmRows ? m - m0 : kGemmRows;
    const float* xt = x + m0 * ldx;
    switch (rows) {
      case 1: gemm_tile<1>(xt, ldx, panel, kc, tile); break;
      case 2: gemm_tile<2>(xt, ldx, panel, kc, tile); break;
      case 3: gemm_tile<3>(xt, ldx, panel, kc, tile); break;
      case 4: gemm_tile<4>(xt, ldx, panel, kc, tile); break;
      case 5: gemm_tile<5>(xt, ldx, panel, kc, tile); break;
      default: gemm_tile<6>(xt, ldx, panel, kc, tile); break;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      float* yr = y + (m0 + r) * ldy;
      const float* tr = tile + r * kPanelCols;
      if (accumulate) {
        for (std::int64_t j = 0; j < num_cols; ++j) yr[j] += tr[j];
      } else {
        for (std::int64_t j = 0; j < num_cols; ++j) yr[j] = tr[j];
      }
    }
  }
}

}  // namespace pagoda::cpu::avx2
