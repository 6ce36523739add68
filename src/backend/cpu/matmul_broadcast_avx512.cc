#include "backend/cpu/matmul_broadcast_avx512.h"

#include <immintrin.h>

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

void transpose_to_columns(const float* x, std::int64_t m, std::int64_t k, std::int64_t vectors,
                          float* xt) {
  const std::int64_t width = kColumnLanes * vectors;
  for (std::int64_t c = 0; c < k; ++c) {
    float* column = xt + c * width;
    for (std::int64_t i = 0; i < m; ++i) column[i] = x[i * k + c];
    for (std::int64_t i = m; i < width; ++i) column[i] = 0.0f;
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
