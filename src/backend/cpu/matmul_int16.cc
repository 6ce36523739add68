// The int16-activation matmuls (kBroadcastInt16, kDirectInt16) over the pool: which ISA's kernel
// takes which rows, x quantized once per call, interleaved panels read in place or deinterleaved.
// The kernels themselves are matmul_int16_avx512.h, matmul_int16_avx2.h, matmul_int16_amx.h and
// the matmul_interleaved_*.h pair; one contract, the same bits on each.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/matmul_dispatch.h"
#include "backend/cpu/matmul_int16_amx.h"
#include "backend/cpu/matmul_int16_avx2.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/matmul_int8_avx2.h"
#include "backend/cpu/matmul_interleaved_avx2.h"
#include "backend/cpu/matmul_interleaved_avx512.h"
#include "common/check.h"

namespace pagoda::cpu {

namespace {

// kBroadcastInt16 on AMX-INT8 tiles (matmul_int16_amx.h): x quantized once for all m rows (as
// quantize_rows_int16, padded with zero rows to whole 8-row tiles) and split into its high and
// low bytes; per thread, 32 weight rows at a time, decoded once into tdpbssd's layout and
// multiplied against every tile of x. The contract's bits, as the AVX-512 tile.
void matmul_amx_int16(ThreadPool& pool, const float* x, std::int64_t m,
                      std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  const std::int64_t num_blocks = k / avx512::kInt16Block;
  const std::int64_t m_pad = (m + amx::kTileRows - 1) / amx::kTileRows * amx::kTileRows;
  thread_local std::vector<std::int16_t> q_buffer;
  thread_local std::vector<float> scales_buffer;
  thread_local std::vector<float> sums_buffer;
  thread_local std::vector<std::int32_t> qsums_buffer;
  thread_local std::vector<std::int8_t> split_buffer;
  q_buffer.resize(static_cast<std::size_t>(m_pad * k));
  scales_buffer.resize(static_cast<std::size_t>(m_pad * num_blocks));
  sums_buffer.resize(scales_buffer.size());
  qsums_buffer.resize(scales_buffer.size());
  split_buffer.resize(2 * q_buffer.size());
  avx512::quantize_rows_int16(x, m, k, q_buffer.data(), scales_buffer.data(), sums_buffer.data(),
                              qsums_buffer.data());
  // The pad rows: zero quants and scales, finite sums that are never stored.
  std::fill(q_buffer.begin() + m * k, q_buffer.end(), 0);
  std::fill(scales_buffer.begin() + m * num_blocks, scales_buffer.end(), 0.0f);
  std::fill(sums_buffer.begin() + m * num_blocks, sums_buffer.end(), 0.0f);
  amx::split_bytes(q_buffer.data(), m_pad, k, split_buffer.data());
  // A lambda naming the thread_locals themselves would see each worker's own (empty) buffers.
  const std::int8_t* split = split_buffer.data();
  const float* scales = scales_buffer.data();
  const float* scaled_sums = sums_buffer.data();
  constexpr std::int64_t kWeightTile = 32;  // the kernel's two 16-row B tiles
  dispatch(pool, outputs, kWeightTile,
           [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
             const TensorView& w = out.w;
             const std::int64_t n = w.num_rows;
             const std::int64_t n_begin = begin * kWeightTile;
             const std::int64_t n_end = std::min(n, end * kWeightTile);
             amx::int16_tiles(w.dtype, split, scales, scaled_sums, m, k, w.row(0), w.row_stride,
                              n_begin, n_end, out.y, n);
             add_bias(out.bias, m, n, n_begin, n_end, out.y);
           });
}

// Rows of x up to which the AVX2 tile reads interleaved weights in place. It reads row-major rows
// 1.02-1.14x faster (a tile of 6 or 4 rows decodes a whole 8-lane window of its panel), which
// repays deinterleaving the weights once per call from about 32 rows on (8192x2048, one thread:
// in place 0.89-0.98x the row-major time at 16 rows, 0.88-0.96x at 512; deinterleaved per call
// 0.85-0.98x at 32, level at 512).
constexpr std::int64_t kAvx2PanelsInPlaceMaxRows = 32;

// Whether the AVX2 tile reads `w`'s panels in place at m rows of x. The int8 tile (AVX-VNNI) reads
// K-quant panels faster than their rows at every row count: its row-major reader gathers each
// group's scales row by row where a panel holds them side by side (512 rows, one thread: Q4_K
// 1.46x, Q6_K 1.14x; Q8_0 and Q4_0 0.84x, so those still go deinterleaved past 32 rows).
bool avx2_tile_reads_in_place(const TensorView& w, std::int64_t m, bool int8_tile) {
  if (m <= kAvx2PanelsInPlaceMaxRows) return true;
  return int8_tile &&
         (w.dtype == DType::kQ4_K || w.dtype == DType::kQ5_K || w.dtype == DType::kQ6_K);
}

// The interleaved weights of `outputs` that the AVX2 tile does not read in place at m rows,
// deinterleaved into a thread-local buffer, which `weights` (a copy of outputs) then names instead.
void deinterleave_for_avx2_tile(ThreadPool& pool, std::span<const MatmulOutput> outputs,
                                std::int64_t m, bool int8_tile, std::span<MatmulOutput> weights) {
  const auto moved = [&](const TensorView& w) {
    return w.interleaved && !avx2_tile_reads_in_place(w, m, int8_tile);
  };
  std::size_t bytes = 0;
  for (const MatmulOutput& out : outputs) {
    if (moved(out.w)) bytes += static_cast<std::size_t>(out.w.num_rows) * out.w.row_stride;
  }
  if (bytes == 0) return;
  thread_local std::vector<std::uint8_t> deinterleaved;
  deinterleaved.resize(bytes);
  std::size_t at = 0;
  for (std::size_t t = 0; t < outputs.size(); ++t) {
    const TensorView& w = outputs[t].w;
    if (!moved(w)) continue;
    std::uint8_t* rows = deinterleaved.data() + at;
    const std::int64_t panels = (w.num_rows + kInterleavedRows - 1) / kInterleavedRows;
    pool.parallel_for(panels, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t p = begin; p < end; ++p) {
        deinterleave_panel_avx2(
            w, p, rows + static_cast<std::size_t>(p * kInterleavedRows) * w.row_stride);
      }
    });
    weights[t].w.data = rows;
    weights[t].w.interleaved = false;
    at += static_cast<std::size_t>(w.num_rows) * w.row_stride;
  }
}

// The AVX2 kBroadcastInt16, one piece of up to avx2::kInt16PieceRows rows of x: x quantized and
// transposed to int16 column pairs (or, with int8 activations on AVX-VNNI, byte quads for the
// int8 tile, matmul_int8_avx2.h) once per call (shared by all threads and outputs); per thread,
// tiles of avx2::int16_tile_rows weight rows, each multiplied against it while the next tile's
// bytes are prefetched.
void matmul_tile_int16_avx2(ThreadPool& pool, const float* x, std::int64_t m,
                            std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  const std::int64_t vectors = (m + avx2::kInt16Lanes - 1) / avx2::kInt16Lanes;
  const std::int64_t width = vectors * avx2::kInt16Lanes;
  const std::int64_t tile_rows = avx2::int16_tile_rows(vectors);
  const bool int8 = cpu_int8_activations() && cpu_int16_avx_vnni();
  thread_local std::vector<std::int32_t> pairs_buffer;
  thread_local std::vector<float> scales_buffer;
  thread_local std::vector<float> sums_buffer;
  thread_local std::vector<std::int32_t> offsets_buffer;
  scales_buffer.resize(static_cast<std::size_t>(k / avx2::kInt16Block * width));
  sums_buffer.resize(scales_buffer.size());
  if (int8) {
    pairs_buffer.resize(static_cast<std::size_t>(k / 4 * width));
    offsets_buffer.resize(2 * scales_buffer.size());
    avx2::quantize_columns_int8(x, m, k, vectors, pairs_buffer.data(), scales_buffer.data(),
                                sums_buffer.data(), offsets_buffer.data());
  } else {
    pairs_buffer.resize(static_cast<std::size_t>(k / 2 * width));
    avx2::quantize_columns_int16(x, m, k, vectors, pairs_buffer.data(), scales_buffer.data(),
                                 sums_buffer.data());
  }
  const std::int32_t* pairs = pairs_buffer.data();
  const float* scales = scales_buffer.data();
  const float* scaled_sums = sums_buffer.data();
  const Int8Columns int8_x{.quads = pairs,
                           .scales = scales,
                           .scaled_sums = scaled_sums,
                           .offsets = offsets_buffer.data()};
  // Interleaved weights go to each thread in whole panels, each read in place in tiles that stay
  // inside it (avx2::int16_tile_interleaved prefetches the next panel itself).
  const bool any_interleaved = std::any_of(
      outputs.begin(), outputs.end(), [](const MatmulOutput& out) { return out.w.interleaved; });
  const std::int64_t unit = any_interleaved ? kInterleavedRows : tile_rows;
  dispatch(pool, outputs, unit, [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
    const TensorView& w = out.w;
    const std::int64_t n = w.num_rows;
    thread_local std::vector<float> acc;
    acc.resize(static_cast<std::size_t>(tile_rows * width));
    const std::int64_t row_begin = begin * unit;
    const std::int64_t row_end = std::min(n, end * unit);
    const std::int64_t panel_tile_rows = avx2::int16_panel_tile_rows(vectors);
    for (std::int64_t n0 = row_begin; n0 < row_end;) {
      std::int64_t count = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (w.interleaved) {
        const std::int64_t lane = n0 % kInterleavedRows;
        count = std::min({panel_tile_rows, kInterleavedRows - lane, row_end - n0});
        const auto* panels = static_cast<const std::uint8_t*>(w.data);
        if (int8) {
          avx2::int8_tile_interleaved(w.dtype, int8_x, vectors, k, panels, w.row_stride, n0, count,
                                      acc.data());
        } else {
          avx2::int16_tile_interleaved(w.dtype, pairs, scales, scaled_sums, vectors, k, panels,
                                       w.row_stride, n0, count, acc.data());
        }
      } else {
        count = std::min(tile_rows, row_end - n0);
        const std::int64_t next_rows =
            n0 + count < row_end ? std::min(tile_rows, row_end - n0 - count) : 0;
        const std::uint8_t* next = next_rows > 0 ? w.row(n0 + count) : nullptr;
        if (int8) {
          avx2::int8_tile(w.dtype, int8_x, vectors, k, w.row(n0), w.row_stride, count, next,
                          next_rows, acc.data());
        } else {
          avx2::int16_tile(w.dtype, pairs, scales, scaled_sums, vectors, k, w.row(n0), w.row_stride,
                           count, next, next_rows, acc.data());
        }
      }
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t r = 0; r < count; ++r) {
          out.y[i * n + n0 + r] = acc[static_cast<std::size_t>(r * width + i)];
        }
      }
      n0 += count;
    }
    add_bias(out.bias, m, n, row_begin, row_end, out.y);
  });
}

}  // namespace

// kBroadcastInt16 in pieces of up to kInt16PieceRows rows of x, each a matmul_broadcast call:
// one vector of 16 rows holds 8 weight rows in its tile and two hold 6, where three or four
// (4 and 3 weight rows) decode more per multiply than the pieces' second pass over the weights
// costs (one thread, 64 rows: Q8_0 1536x576 465 us in one call, 2 x 177 in two; Q4_1 712 vs
// 2 x 192; BM_MatmulBatchedDecode). Rows do not interact, so the results are those of one call.
void matmul_broadcast_int16(ThreadPool& pool, const float* x, std::int64_t m,
                            std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  if (cpu_has_amx_int8() &&
      std::all_of(outputs.begin(), outputs.end(),
                  [](const MatmulOutput& out) { return amx::takes(out.w.dtype); })) {
    return matmul_amx_int16(pool, x, m, outputs);
  }
  const bool avx512_kernel = int16_on_avx512();
  const std::int64_t piece_rows = avx512_kernel ? avx512::kInt16PieceRows : avx2::kInt16PieceRows;
  std::array<MatmulOutput, kMaxFusedOutputs> weights;
  std::copy(outputs.begin(), outputs.end(), weights.begin());
  if (!avx512_kernel) {
    deinterleave_for_avx2_tile(pool, outputs, m, cpu_int8_activations() && cpu_int16_avx_vnni(),
                               weights);
  }
  for (std::int64_t r0 = 0; r0 < m; r0 += piece_rows) {
    const std::int64_t rows = std::min(piece_rows, m - r0);
    std::array<MatmulOutput, kMaxFusedOutputs> piece;
    for (std::size_t t = 0; t < outputs.size(); ++t) {
      piece[t] = weights[t];
      piece[t].y = outputs[t].y + r0 * outputs[t].w.num_rows;
    }
    const std::span<const MatmulOutput> piece_outputs(piece.data(), outputs.size());
    if (avx512_kernel) {
      matmul_broadcast(pool, x + r0 * k, rows, piece_outputs, true);
    } else {
      matmul_tile_int16_avx2(pool, x + r0 * k, rows, piece_outputs);
    }
  }
}

// Per thread: groups of 16 (AVX-512) or 8 (AVX2) weight rows, each block of the group multiplied
// with the 1-8 rows of x (quantized to int16 once per call) and summed into one lane per weight
// row; each lane walks its own run of the thread's rows (int16_kernel_loops.h). Both ISAs' kernels
// compute the same bits (the contract, matmul_int16_avx512.h).
void matmul_direct_int16(ThreadPool& pool, const float* x, std::int64_t m,
                         std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  const std::int64_t num_blocks = k / avx512::kInt16Block;
  const bool avx512_kernel = int16_on_avx512();
  thread_local std::vector<std::int16_t> q_buffer;
  thread_local std::vector<float> scales_buffer;
  thread_local std::vector<float> sums_buffer;
  thread_local std::vector<std::int32_t> qsums_buffer;
  q_buffer.resize(static_cast<std::size_t>(m * k));
  scales_buffer.resize(static_cast<std::size_t>(m * num_blocks));
  sums_buffer.resize(scales_buffer.size());
  qsums_buffer.resize(scales_buffer.size());
  if (avx512_kernel) {
    avx512::quantize_rows_int16(x, m, k, q_buffer.data(), scales_buffer.data(), sums_buffer.data(),
                                qsums_buffer.data());
  } else {
    avx2::quantize_rows_int16(x, m, k, q_buffer.data(), scales_buffer.data(), sums_buffer.data(),
                              qsums_buffer.data());
  }
  // A lambda naming the thread_locals themselves would see each worker's own (empty) buffers.
  const std::int16_t* q = q_buffer.data();
  const float* scales = scales_buffer.data();
  const float* scaled_sums = sums_buffer.data();
  const std::int32_t* qsums = qsums_buffer.data();
  // Interleaved weights' x on AVX-512: the same q split into bytes (matmul_interleaved_avx512.h);
  // the AVX2 kernel forms its own from q.
  thread_local avx512::Int16XBytes interleaved_x;
  const bool any_interleaved = std::any_of(
      outputs.begin(), outputs.end(), [](const MatmulOutput& out) { return out.w.interleaved; });
  if (any_interleaved && avx512_kernel) {
    avx512::split_rows_int16(q, m, k, interleaved_x);
    interleaved_x.scales = scales;
    interleaved_x.scaled_sums = scaled_sums;
    interleaved_x.qsums = qsums;
  }
  const avx512::Int16XBytes& x_bytes = interleaved_x;
  // A dispatch unit is one panel where any weight is interleaved (the AVX2 row-major kernel takes
  // any multiple of its 8-row groups).
  const std::int64_t group =
      avx512_kernel || any_interleaved ? kInterleavedRows : avx2::kInt16DirectGroup;
  static_assert(avx512::kInt16DirectGroup == kInterleavedRows, "a dispatch unit is one panel");
  static_assert(kInterleavedRows % avx2::kInt16DirectGroup == 0);
  dispatch(
      pool, outputs, group,
      [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
        const TensorView& w = out.w;
        const std::int64_t n = w.num_rows;
        const std::int64_t n_begin = begin * group;
        const std::int64_t n_end = std::min(n, end * group);
        if (w.interleaved && avx512_kernel) {
          avx512::interleaved_direct(w.dtype, x_bytes, m, k,
                                     static_cast<const std::uint8_t*>(w.data), w.row_stride, n,
                                     begin, end, out.y, n);
        } else if (w.interleaved) {
          avx2::interleaved_direct(w.dtype, q, scales, scaled_sums, m, k,
                                   static_cast<const std::uint8_t*>(w.data), w.row_stride, n, begin,
                                   end, out.y, n);
        } else if (avx512_kernel) {
          avx512::int16_direct(w.dtype, q, scales, scaled_sums, qsums, m, k, w.row(0), w.row_stride,
                               n_begin, n_end, out.y, n);
        } else {
          avx2::int16_direct(w.dtype, q, scales, scaled_sums, m, k, w.row(0), w.row_stride, n_begin,
                             n_end, out.y, n);
        }
        add_bias(out.bias, m, n, n_begin, n_end, out.y);
      },
      ThreadPool::Schedule::kEven);  // a weight stream, as matmul_direct
}

}  // namespace pagoda::cpu
