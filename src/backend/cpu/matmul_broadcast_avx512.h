// AVX-512 inner kernel of the broadcast matmul (batched decode, 12 to 64 rows of x). x is
// transposed so that one zmm holds column c of 16 rows of x; each decoded weight w[n, c] is
// broadcast and multiplied into it. An output y[i, n] is then one fp32 FMA chain over c = 0..K-1
// in lane i: no horizontal sums (the row-group kernel spends ~25% of its time in them), and the
// result does not depend on how many rows share the call. Call only when cpu_has_avx512().
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::avx512 {

/// Rows of x one column vector holds.
inline constexpr std::int64_t kColumnLanes = 16;
/// Column vectors for the most rows of x the kernel takes (64).
inline constexpr std::int64_t kMaxColumnVectors = 4;
/// zmm accumulators per tile: weight rows x column vectors.
inline constexpr std::int64_t kBroadcastAccumulators = 24;

/// Columns of decoded weights per broadcast_tile call; the weight buffer's row stride is this, or
/// twice this for 256-element blocks (K-quants).
inline constexpr int kBroadcastDepth = 128;

/// Weight rows per tile when x spans `vectors` column vectors (24, 12, 8, 6).
constexpr std::int64_t broadcast_tile_rows(std::int64_t vectors) {
  return kBroadcastAccumulators / vectors;
}

/// xt[c, i] = x[i, c] for i < m and 0 for m <= i < kColumnLanes * vectors.
void transpose_to_columns(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                          std::int64_t vectors, float* xt /* [k, kColumnLanes * vectors] */);

/// y[i, r] = acc[r, i] for r < rows and i < m <= kColumnLanes: a one-vector tile's sums back to
/// row-major outputs, through 16 x 16 register transposes and masked stores.
void store_tile_transposed(const float* acc /* [rows, kColumnLanes] */, std::int64_t rows,
                           std::int64_t m, float* y /* [m, ldy] */, std::int64_t ldy);

/// For each of the broadcast_tile_rows(vectors) weight rows r and lanes l:
/// acc[r, l] = fma(w[r, c], xt[c, l], acc[r, l]) for c = 0, 1, ..., depth - 1, in that order.
void broadcast_tile(const float* xt /* [depth, kColumnLanes * vectors] */, std::int64_t vectors,
                    std::int64_t depth /* <= ldw */,
                    const float* w /* [rows, ldw] fp32, ldw = kBroadcastDepth or twice it */,
                    std::int64_t ldw, float* acc /* [rows, kColumnLanes * vectors] */);

/// As broadcast_tile over all k columns, for num_rows <= broadcast_tile_rows(vectors) stored
/// rows (row r at w + r * w_stride) of a type avx512::decodes() (Q8_0, Q4_0, Q4_1): each
/// 32-weight block is decoded while the FMAs of the one before run, so decode and FMAs overlap
/// instead of taking turns. Same results, bit for bit, as decoding first. `next` (or nullptr):
/// the first of `next_rows` rows, same stride, to prefetch meanwhile (the next tile).
void broadcast_tile_quantized(DType dtype, const float* xt /* [k, kColumnLanes * vectors] */,
                              std::int64_t vectors, std::int64_t k,
                              const std::uint8_t* w /* [num_rows, k] stored */,
                              std::size_t w_stride, std::int64_t num_rows, const std::uint8_t* next,
                              std::int64_t next_rows,
                              float* acc /* [rows, kColumnLanes * vectors] */);

}  // namespace pagoda::cpu::avx512
