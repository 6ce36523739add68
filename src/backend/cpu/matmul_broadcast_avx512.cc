#include "backend/cpu/matmul_broadcast_avx512.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/weight_blocks_avx512.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

namespace {

// kRows x kVectors accumulators stay in registers for the whole depth; per column, kVectors loads
// of x serve kRows x kVectors FMAs whose weight operand is an embedded broadcast from memory.
// kLdw is a compile-time stride so that the 24 weight addresses are one pointer plus constant
// displacements (a run-time stride spills row pointers to the stack: 6 extra loads per column).
template <int kVectors, int kLdw>
void broadcast_tile_typed(const float* xt, std::int64_t depth, const float* w, float* acc) {
  constexpr int kRows = static_cast<int>(broadcast_tile_rows(kVectors));
  constexpr int kWidth = static_cast<int>(kColumnLanes) * kVectors;
  // Every loop over a is unrolled: a rolled one makes GCC keep the array on the stack.
  __m512 a[kRows][kVectors];
#pragma GCC unroll 24
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_loadu_ps(acc + r * kWidth + v * 16);
  }
  for (std::int64_t c = 0; c < depth; ++c) {
    __m512 xv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) xv[v] = _mm512_loadu_ps(xt + c * kWidth + v * 16);
#pragma GCC unroll 24
    for (int r = 0; r < kRows; ++r) {
      const __m512 wv = _mm512_set1_ps(w[r * kLdw + c]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_fmadd_ps(wv, xv[v], a[r][v]);
    }
  }
#pragma GCC unroll 24
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(acc + r * kWidth + v * 16, a[r][v]);
  }
}

// The FMAs of one 32-column block go in kSteps steps of 4 columns; after each, the next block
// of a few rows is decoded into the other buffer. The out-of-order core then runs the decode's
// shuffles and conversions beside the FMAs (about 100 FMAs and 3 block decodes per step).
//
//   block b:   FMA cols 0-3 | decode rows 0-2 of b+1 | FMA cols 4-7 | rows 3-5 | ... | cols 28-31
template <typename Block, int kVectors>
void broadcast_tile_pipelined(const float* xt, std::int64_t k, const std::uint8_t* w,
                              std::size_t w_stride, std::int64_t num_rows, const std::uint8_t* next,
                              std::int64_t next_rows, float* acc) {
  constexpr int kRows = static_cast<int>(broadcast_tile_rows(kVectors));
  constexpr int kWidth = static_cast<int>(kColumnLanes) * kVectors;
  constexpr int kSteps = 8;
  constexpr int kColumnsPerStep = kBlock / kSteps;
  constexpr int kRowsPerStep = (kRows + kSteps - 1) / kSteps;
  const std::int64_t num_blocks = k / kBlock;
  // Rows past num_rows stay zero: finite products whose sums the caller drops.
  alignas(64) float decoded[2][kRows][kBlock] = {};
  for (std::int64_t r = 0; r < num_rows; ++r) decode_block<Block>(w + r * w_stride, decoded[0][r]);

  __m512 a[kRows][kVectors];
#pragma GCC unroll 24
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_loadu_ps(acc + r * kWidth + v * 16);
  }
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const float(*current)[kBlock] = decoded[b & 1];
    float(*following)[kBlock] = decoded[(b + 1) & 1];
    const bool has_following = b + 1 < num_blocks;
    const std::size_t following_offset = static_cast<std::size_t>(b + 1) * Block::kBytes;
    if (next != nullptr) {
      for (std::int64_t r = 0; r < next_rows; ++r) {
        __builtin_prefetch(next + r * w_stride + b * Block::kBytes, /*rw=*/0, /*locality=*/3);
      }
    }
    const float* xb = xt + b * kBlock * kWidth;
    for (int step = 0; step < kSteps; ++step) {
      for (int cc = 0; cc < kColumnsPerStep; ++cc) {
        const int c = step * kColumnsPerStep + cc;
        __m512 xv[kVectors];
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) xv[v] = _mm512_loadu_ps(xb + c * kWidth + v * 16);
#pragma GCC unroll 24
        for (int r = 0; r < kRows; ++r) {
          const __m512 wv = _mm512_set1_ps(current[r][c]);
#pragma GCC unroll 4
          for (int v = 0; v < kVectors; ++v) a[r][v] = _mm512_fmadd_ps(wv, xv[v], a[r][v]);
        }
      }
      if (has_following) {
        for (int rr = 0; rr < kRowsPerStep; ++rr) {
          const int r = step * kRowsPerStep + rr;
          if (r < num_rows) decode_block<Block>(w + r * w_stride + following_offset, following[r]);
        }
      }
    }
  }
#pragma GCC unroll 24
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(acc + r * kWidth + v * 16, a[r][v]);
  }
}

template <typename Block>
void broadcast_tile_block_type(const float* xt, std::int64_t vectors, std::int64_t k,
                               const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
                               const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  switch (vectors) {
    case 1:
      return broadcast_tile_pipelined<Block, 1>(xt, k, w, w_stride, num_rows, next, next_rows, acc);
    case 2:
      return broadcast_tile_pipelined<Block, 2>(xt, k, w, w_stride, num_rows, next, next_rows, acc);
    case 3:
      return broadcast_tile_pipelined<Block, 3>(xt, k, w, w_stride, num_rows, next, next_rows, acc);
    default:
      return broadcast_tile_pipelined<Block, 4>(xt, k, w, w_stride, num_rows, next, next_rows, acc);
  }
}

}  // namespace

void broadcast_tile_quantized(DType dtype, const float* xt, std::int64_t vectors, std::int64_t k,
                              const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
                              const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  switch (dtype) {
    case DType::kQ4_0:
      return broadcast_tile_block_type<Q4_0Block>(xt, vectors, k, w, w_stride, num_rows, next,
                                                  next_rows, acc);
    case DType::kQ4_1:
      return broadcast_tile_block_type<Q4_1Block>(xt, vectors, k, w, w_stride, num_rows, next,
                                                  next_rows, acc);
    default:
      PAGODA_CHECK(dtype == DType::kQ8_0) << dtype_name(dtype);
      return broadcast_tile_block_type<Q8_0Block>(xt, vectors, k, w, w_stride, num_rows, next,
                                                  next_rows, acc);
  }
}

namespace {

// out[j] lane i = r[i] lane j: unpacks build 4x4 blocks inside each 128-bit lane, then lane
// shuffles gather each column's four blocks (64 shuffles for 256 elements, where a scalar copy
// takes a load and a store each; gathers are slow on some AVX-512 machines, this one included).
void transpose16x16(const __m512 r[16], __m512 out[16]) {
  // Full-mask maskz forms: the same instructions, without the plain forms' "undefined" pass-through
  // operand that gcc 12 reports as used uninitialized once inlined.
  constexpr __mmask16 kAll16 = 0xffff;
  constexpr __mmask8 kAll8 = 0xff;
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {  // rows 4g..4g+3
    const __m512 t0 = _mm512_maskz_unpacklo_ps(kAll16, r[4 * g], r[4 * g + 1]);
    const __m512 t1 = _mm512_maskz_unpackhi_ps(kAll16, r[4 * g], r[4 * g + 1]);
    const __m512 t2 = _mm512_maskz_unpacklo_ps(kAll16, r[4 * g + 2], r[4 * g + 3]);
    const __m512 t3 = _mm512_maskz_unpackhi_ps(kAll16, r[4 * g + 2], r[4 * g + 3]);
    // u[4g + j], 128-bit lane L: column 4L + j, rows 4g..4g+3.
    u[4 * g + 0] = _mm512_castpd_ps(
        _mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(t0), _mm512_castps_pd(t2)));
    u[4 * g + 1] = _mm512_castpd_ps(
        _mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(t0), _mm512_castps_pd(t2)));
    u[4 * g + 2] = _mm512_castpd_ps(
        _mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(t1), _mm512_castps_pd(t3)));
    u[4 * g + 3] = _mm512_castpd_ps(
        _mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(t1), _mm512_castps_pd(t3)));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 a1 = _mm512_maskz_shuffle_f32x4(kAll16, u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 a2 = _mm512_maskz_shuffle_f32x4(kAll16, u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 b1 =
        _mm512_maskz_shuffle_f32x4(kAll16, u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 b2 =
        _mm512_maskz_shuffle_f32x4(kAll16, u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    out[0 + j] = _mm512_maskz_shuffle_f32x4(kAll16, a1, b1, _MM_SHUFFLE(2, 0, 2, 0));
    out[4 + j] = _mm512_maskz_shuffle_f32x4(kAll16, a1, b1, _MM_SHUFFLE(3, 1, 3, 1));
    out[8 + j] = _mm512_maskz_shuffle_f32x4(kAll16, a2, b2, _MM_SHUFFLE(2, 0, 2, 0));
    out[12 + j] = _mm512_maskz_shuffle_f32x4(kAll16, a2, b2, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Rows `first`.. of x (up to 16, zeros past m) for 16 columns from c0:
// xt[c0 + j, first + i] = x[first + i, c0 + j].
void transpose_block16(const float* x, std::int64_t k, std::int64_t live, std::int64_t c0,
                       float* xt_column0, std::int64_t width) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = i < live ? _mm512_loadu_ps(x + i * k + c0) : _mm512_setzero_ps();
  }
  __m512 columns[16];
  transpose16x16(r, columns);
  for (int j = 0; j < 16; ++j) _mm512_storeu_ps(xt_column0 + j * width, columns[j]);
}

}  // namespace

// Runs on the calling thread before every batched matmul (~1.6 M elements per 16-way decode step
// of the default model), so whole 16 x 16 blocks go through registers; the last k % 16 columns
// are copied one element at a time.
void transpose_to_columns(const float* x, std::int64_t m, std::int64_t k, std::int64_t vectors,
                          float* xt) {
  const std::int64_t width = kColumnLanes * vectors;
  const std::int64_t whole = k - k % 16;
  for (std::int64_t v = 0; v < vectors; ++v) {
    const std::int64_t first = v * kColumnLanes;
    const std::int64_t live = std::clamp<std::int64_t>(m - first, 0, kColumnLanes);
    const float* rows = x + first * k;
    for (std::int64_t c0 = 0; c0 < whole; c0 += 16) {
      transpose_block16(rows, k, live, c0, xt + c0 * width + first, width);
    }
    for (std::int64_t c = whole; c < k; ++c) {
      float* column = xt + c * width + first;
      for (std::int64_t i = 0; i < kColumnLanes; ++i) column[i] = i < live ? rows[i * k + c] : 0.0f;
    }
  }
}

void store_tile_transposed(const float* acc, std::int64_t rows, std::int64_t m, float* y,
                           std::int64_t ldy) {
  PAGODA_CHECK(m <= kColumnLanes) << m;
  for (std::int64_t r0 = 0; r0 < rows; r0 += 16) {
    const std::int64_t live = std::min<std::int64_t>(16, rows - r0);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < live ? _mm512_loadu_ps(acc + (r0 + i) * kColumnLanes) : _mm512_setzero_ps();
    }
    __m512 tokens[16];
    transpose16x16(r, tokens);
    const auto mask = static_cast<__mmask16>((1u << live) - 1);
    for (std::int64_t i = 0; i < m; ++i) _mm512_mask_storeu_ps(y + i * ldy + r0, mask, tokens[i]);
  }
}

template <int kLdw>
void broadcast_tile_strided(const float* xt, std::int64_t vectors, std::int64_t depth,
                            const float* w, float* acc) {
  switch (vectors) {
    case 1: return broadcast_tile_typed<1, kLdw>(xt, depth, w, acc);
    case 2: return broadcast_tile_typed<2, kLdw>(xt, depth, w, acc);
    case 3: return broadcast_tile_typed<3, kLdw>(xt, depth, w, acc);
    default: return broadcast_tile_typed<4, kLdw>(xt, depth, w, acc);
  }
}

void broadcast_tile(const float* xt, std::int64_t vectors, std::int64_t depth, const float* w,
                    std::int64_t ldw, float* acc) {
  if (ldw == kBroadcastDepth)
    return broadcast_tile_strided<kBroadcastDepth>(xt, vectors, depth, w, acc);
  PAGODA_CHECK_EQ(ldw, 2 * kBroadcastDepth) << "broadcast_tile weight stride";
  broadcast_tile_strided<2 * kBroadcastDepth>(xt, vectors, depth, w, acc);
}

}  // namespace pagoda::cpu::avx512
