#include "backend/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/input_permutation.h"
#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/matmul_avx2.h"
#include "backend/cpu/matmul_avx512.h"
#include "backend/cpu/matmul_broadcast_avx512.h"
#include "backend/cpu/matmul_dispatch.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/matmul_int8_avx512.h"
#include "backend/cpu/row_decoder.h"
#include "common/check.h"
#include "model/dequantize.h"

namespace pagoda::cpu {

namespace {

// Up to this many rows of x, decoding each weight block straight into registers for every tile
// of 4 rows beats decoding once into a panel (BM_MatmulCrossover, Q4_1 1536x576: direct 104 vs
// packed 72 GFLOP/s at 16 rows, 91 vs 84 at 32).
constexpr std::int64_t kDirectMaxRows = 32;
// With AVX-512, rows of x from here to kRowGroupMaxRows (batched decode) go to the row-group
// kernel: it decodes each weight once, where the direct kernel decodes it once per 4 rows
// (BM_MatmulBatchedDecode, docs/perf/cpu.md). Past that, x no longer stays in L2 across the
// weight groups and the K-blocked packed kernel wins.
constexpr std::int64_t kRowGroupMinRows = 4;
// From here to kBroadcastMaxRows the broadcast kernel replaces the row-group one. Its cost is
// flat up to 16 rows (one column vector), the row group's grows with the rows: on one thread
// Q4_1 1536x576 takes 183 vs 158 us at 8 rows and 188-197 vs 189-193 at 16, the Q8_0 LM head
// 5.5 vs 3.7 ms at 8 and 5.6 vs 7.0 at 16 (BM_MatmulBatchedDecode, docs/perf/cpu.md).
constexpr std::int64_t kBroadcastMinRows = 12;
constexpr std::int64_t kBroadcastMaxRows = avx512::kColumnLanes * avx512::kMaxColumnVectors;
constexpr std::int64_t kRowGroupMaxRows = 64;
// Panel depth of the packed kernel: 256 floats x 16 columns = 16 KiB stays in L1 while every
// row of x streams past it; a multiple of 256 so K-quant super-blocks are never split.
constexpr std::int64_t kPanelDepth = 256;
// Weight rows per cblas_sgemm call of the BLAS path.
constexpr std::int64_t kBlasPanelRows = 64;

// Weight rows [n_begin, n_end) of any dequantizable type, one row decoded to fp32 at a time.
void direct_rows_decoded(const float* x, std::int64_t m, const TensorView& w, std::int64_t n_begin,
                         std::int64_t n_end, float* y) {
  const std::int64_t k = w.num_cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(k));
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    decode_row(w, n, 0, k, row.data());
    if (cpu_has_avx2()) {
      avx2::matmul_direct(DType::kF32, x, m, k, nullptr,
                          reinterpret_cast<const std::uint8_t*>(row.data()), 0, 0, 1, y + n,
                          w.num_rows);
      continue;
    }
    for (std::int64_t i = 0; i < m; ++i) {
      // Four partial sums break the dependency chain for the compiler.
      float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const float* xr = x + i * k;
      std::int64_t j = 0;
      for (; j + 4 <= k; j += 4) {
        for (int l = 0; l < 4; ++l) partial[l] += xr[j + l] * row[j + l];
      }
      for (; j < k; ++j) partial[0] += xr[j] * row[j];
      y[i * w.num_rows + n] = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    }
  }
}

void matmul_direct(ThreadPool& pool, const float* x, std::int64_t m,
                   std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  bool any_sums = false;
  for (const MatmulOutput& out : outputs) {
    any_sums |= cpu_has_avx2() && avx2::decodes(out.w.dtype) && out.w.dtype == DType::kQ4_1;
  }
  std::vector<float> sums;
  if (any_sums) {
    sums.resize(static_cast<std::size_t>(m * (k / 32)));
    avx2::block_sums(x, m, k, sums.data());
  }
  dispatch(
      pool, outputs, 1,
      [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
        const TensorView& w = out.w;
        const std::int64_t n = w.num_rows;
        if (cpu_has_avx512() && avx512::decodes(w.dtype)) {
          avx512::matmul_direct(w.dtype, x, m, k, sums.data(), w.row(0), w.row_stride, begin, end,
                                out.y, n);
        } else if (cpu_has_avx2() && avx2::decodes(w.dtype)) {
          avx2::matmul_direct(w.dtype, x, m, k, sums.data(), w.row(0), w.row_stride, begin, end,
                              out.y, n);
        } else {
          direct_rows_decoded(x, m, w, begin, end, out.y);
        }
        add_bias(out.bias, m, n, begin, end, out.y);
      },
      ThreadPool::Schedule::kEven);  // 1-3 rows: a weight stream, bandwidth-bound.
}

// How many groups ahead matmul_row_group prefetches weight rows.
constexpr std::int64_t kPrefetchGroups = 2;

// Asks for bytes [byte_begin, byte_end) of rows [first, first + count) of `w` (rows clipped to
// its end) to be brought into the cache.
void prefetch_rows(const TensorView& w, std::int64_t first, std::int64_t count,
                   std::size_t byte_begin, std::size_t byte_end) {
  for (std::int64_t r = first; r < std::min(first + count, w.num_rows); ++r) {
    const char* p = reinterpret_cast<const char*>(w.row(r));
    for (std::size_t offset = byte_begin; offset < byte_end; offset += 64) {
      __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
    }
  }
}

std::size_t row_bytes(const TensorView& w) {
  const DTypeInfo& info = dtype_info(w.dtype);
  return static_cast<std::size_t>(w.num_cols / info.block_size) *
         static_cast<std::size_t>(info.block_bytes);
}

// Per thread: groups of 4 weight rows, each decoded once into an fp32 buffer (4 x K floats, in
// L1 for SmolLM2's K) and then dotted with every row of x. The direct kernel instead decodes
// every block again for each tile of 4 rows of x, and decoding, not loading, is what costs.
void matmul_row_group(ThreadPool& pool, const float* x, std::int64_t m,
                      std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  dispatch(pool, outputs, avx512::kRowGroup,
           [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
             const TensorView& w = out.w;
             const std::int64_t n = w.num_rows;
             thread_local std::vector<float> rows;
             // Zeroed so a short last group dots finite values.
             rows.assign(static_cast<std::size_t>(avx512::kRowGroup * k), 0.0f);
             for (std::int64_t g = begin; g < end; ++g) {
               const std::int64_t n0 = g * avx512::kRowGroup;
               const std::int64_t count = std::min(avx512::kRowGroup, n - n0);
               for (std::int64_t j = 0; j < count; ++j) {
                 decode_row(w, n0 + j, 0, k, rows.data() + j * k);
               }
               // The dots touch no weight memory, so the hardware prefetcher stalls between
               // groups and each decode would start on cold misses: fetch the next group while
               // this one computes.
               if (g + kPrefetchGroups < end) {
                 prefetch_rows(w, n0 + kPrefetchGroups * avx512::kRowGroup, avx512::kRowGroup, 0,
                               row_bytes(w));
               }
               avx512::dot_rows(x, m, k, rows.data(), count, out.y + n0, n);
             }
             add_bias(out.bias, m, n, begin * avx512::kRowGroup,
                      std::min(n, end * avx512::kRowGroup), out.y);
           });
}

// One broadcast tile of any other dequantizable type: rows [n0, n0 + count) decoded
// kBroadcastDepth columns at a time (256 for K-quant super-blocks: 24 x 256 floats, 24 KiB, still
// in L1) into `weights`, each piece multiplied into `acc` before the next is decoded; the next
// tile's bytes of the same columns are prefetched meanwhile.
void broadcast_decoded_tile(const TensorView& w, std::int64_t n0, std::int64_t count,
                            const float* xt, std::int64_t vectors, bool prefetch_next,
                            float* weights /* [tile rows, ldw] */, float* acc) {
  const DTypeInfo& info = dtype_info(w.dtype);
  const std::int64_t k = w.num_cols;
  const std::int64_t width = vectors * avx512::kColumnLanes;
  const std::int64_t tile_rows = avx512::broadcast_tile_rows(vectors);
  const bool small_blocks = info.block_size <= avx512::kBroadcastDepth;
  const std::int64_t depth = small_blocks
                                 ? avx512::kBroadcastDepth / info.block_size * info.block_size
                                 : 2 * avx512::kBroadcastDepth;
  const std::int64_t ldw = small_blocks ? avx512::kBroadcastDepth : 2 * avx512::kBroadcastDepth;
  for (std::int64_t c0 = 0; c0 < k; c0 += depth) {
    const std::int64_t d = std::min(depth, k - c0);
    const auto byte_begin = static_cast<std::size_t>(c0 / info.block_size * info.block_bytes);
    const auto byte_end =
        byte_begin + static_cast<std::size_t>(d / info.block_size * info.block_bytes);
    for (std::int64_t r = 0; r < count; ++r) {
      decode_blocks(w.dtype, w.row(n0 + r) + byte_begin, d, weights + r * ldw);
    }
    if (prefetch_next) prefetch_rows(w, n0 + tile_rows, tile_rows, byte_begin, byte_end);
    avx512::broadcast_tile(xt + c0 * width, vectors, d, weights, ldw, acc);
  }
}

// Per thread: 16 weight rows x 256 columns decoded and transposed into a panel, then every row
// of x multiplied against it in 6x16 register tiles.
//
//   W [N, K]:  rows n0..n0+15, cols k0..k0+255  --decode-->  rows [16, 256]
//              --transpose-->  panel [256, 16]   (panel[kk, j] = W[n0 + j, k0 + kk])
//   y[:, n0:n0+16] (+)= x[:, k0:k0+256] · panel
void matmul_packed(ThreadPool& pool, const float* x, std::int64_t m,
                   std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  dispatch(pool, outputs, avx2::kPanelCols,
           [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
             const TensorView& w = out.w;
             const std::int64_t n = w.num_rows;
             thread_local std::vector<float> rows;
             thread_local std::vector<float> panel;
             rows.assign(static_cast<std::size_t>(avx2::kPanelCols * kPanelDepth), 0.0f);
             panel.resize(static_cast<std::size_t>(kPanelDepth * avx2::kPanelCols));
             for (std::int64_t p = begin; p < end; ++p) {
               const std::int64_t n0 = p * avx2::kPanelCols;
               const std::int64_t cols = std::min(avx2::kPanelCols, n - n0);
               for (std::int64_t k0 = 0; k0 < k; k0 += kPanelDepth) {
                 const std::int64_t depth = std::min(kPanelDepth, k - k0);
                 for (std::int64_t j = 0; j < cols; ++j) {
                   decode_row(w, n0 + j, k0, depth, rows.data() + j * kPanelDepth);
                 }
                 for (std::int64_t kk = 0; kk < depth; ++kk) {
                   for (std::int64_t j = 0; j < avx2::kPanelCols; ++j) {
                     panel[static_cast<std::size_t>(kk * avx2::kPanelCols + j)] =
                         j < cols ? rows[static_cast<std::size_t>(j * kPanelDepth + kk)] : 0.0f;
                   }
                 }
                 avx2::gemm_packed(x + k0, m, k, panel.data(), depth, out.y + n0, n, cols, k0 > 0);
               }
             }
             add_bias(out.bias, m, n, begin * avx2::kPanelCols, std::min(n, end * avx2::kPanelCols),
                      out.y);
           });
}

// Per thread: 64 weight rows decoded whole into an fp32 panel, then one single-threaded
// cblas_sgemm per panel (OpenBLAS's own threads would fight the pool's).
void matmul_blas_panel(ThreadPool& pool, const float* x, std::int64_t m,
                       std::span<const MatmulOutput> outputs) {
  const std::int64_t k = outputs[0].w.num_cols;
  openblas_set_num_threads(1);
  dispatch(pool, outputs, kBlasPanelRows,
           [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
             const TensorView& w = out.w;
             const std::int64_t n = w.num_rows;
             thread_local std::vector<float> panel;
             panel.resize(static_cast<std::size_t>(kBlasPanelRows * k));
             for (std::int64_t p = begin; p < end; ++p) {
               const std::int64_t n0 = p * kBlasPanelRows;
               const std::int64_t rows = std::min(kBlasPanelRows, n - n0);
               for (std::int64_t j = 0; j < rows; ++j)
                 decode_row(w, n0 + j, 0, k, panel.data() + j * k);
               cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
                           static_cast<blasint>(rows), static_cast<blasint>(k), 1.0f, x,
                           static_cast<blasint>(k), panel.data(), static_cast<blasint>(k), 0.0f,
                           out.y + n0, static_cast<blasint>(n));
             }
             add_bias(out.bias, m, n, begin * kBlasPanelRows, std::min(n, end * kBlasPanelRows),
                      out.y);
           });
}

// Interleaved weights for a kernel that reads GGUF rows (every kernel but the AVX-512 int16 ones):
// each interleaved output's rows deinterleaved a chunk at a time and multiplied as a row-major
// matrix. Correct, not fast; the layout is only made where the int16 kernels run
// (interleaved_rows.h), so this serves tests and a kernel forced by hand.
void matmul_deinterleaved(ThreadPool& pool, const float* x, std::int64_t m,
                          std::span<const MatmulOutput> outputs, MatmulKernel kernel) {
  constexpr std::int64_t kChunkRows = 256;
  for (const MatmulOutput& out : outputs) {
    if (!out.w.interleaved) {
      matmul_fused(pool, x, m, std::span(&out, 1), kernel);
      continue;
    }
    const std::int64_t n = out.w.num_rows;
    std::vector<std::uint8_t> rows(static_cast<std::size_t>(kChunkRows) * out.w.row_stride);
    std::vector<float> y(static_cast<std::size_t>(m * kChunkRows));
    for (std::int64_t r0 = 0; r0 < n; r0 += kChunkRows) {
      const std::int64_t count = std::min(kChunkRows, n - r0);
      deinterleave_rows(out.w, r0, r0 + count, rows.data());
      TensorView chunk = out.w;
      chunk.data = rows.data();
      chunk.num_rows = count;
      chunk.interleaved = false;
      const MatmulOutput piece{
          .w = chunk, .bias = out.bias != nullptr ? out.bias + r0 : nullptr, .y = y.data()};
      matmul_fused(pool, x, m, std::span(&piece, 1), kernel);
      for (std::int64_t i = 0; i < m; ++i) {
        std::copy_n(y.data() + i * count, count, out.y + i * n + r0);
      }
    }
  }
}

}  // namespace

// Per thread: tiles of R weight rows (24 for up to 16 rows of x, fewer for more), decoded piece
// by piece into an L1 buffer and multiplied against x transposed once per call (xt, shared by
// all threads and outputs), while the next tile's weight bytes are prefetched.
//
//   xt [K, 16 V]: column c of x in V vectors      weights [R, piece]: rows n0..n0+R-1,
//   acc[r, i] = sum over c, in order, of           a run of columns, decoded
//               weights[r, c] * xt[c, i]            y[i, n0 + r] = acc[r, i]
//
// With int16_activations (kBroadcastInt16), xt is further quantized to int16 column pairs once
// per call and each tile sums integer products block by block (matmul_int16_avx512.h), or, with
// int8 activations, to byte quads for the int8 tile (matmul_int8_avx512.h).
void matmul_broadcast(ThreadPool& pool, const float* x, std::int64_t m,
                      std::span<const MatmulOutput> outputs, bool int16_activations) {
  const std::int64_t k = outputs[0].w.num_cols;
  const bool int8_activations = int16_activations && cpu_int8_activations();
  const std::int64_t vectors = (m + avx512::kColumnLanes - 1) / avx512::kColumnLanes;
  const std::int64_t width = vectors * avx512::kColumnLanes;
  const std::int64_t tile_rows =
      int16_activations ? avx512::int16_tile_rows(vectors) : avx512::broadcast_tile_rows(vectors);
  thread_local std::vector<float> xt_buffer;
  thread_local std::vector<std::int32_t> pairs_buffer;
  thread_local std::vector<float> scales_buffer;
  thread_local std::vector<float> sums_buffer;
  thread_local std::vector<std::int32_t> offsets_buffer;
  xt_buffer.resize(static_cast<std::size_t>(k * width));
  avx512::transpose_to_columns(x, m, k, vectors, xt_buffer.data());
  if (int8_activations) {
    pairs_buffer.resize(static_cast<std::size_t>(k / 4 * width));
    scales_buffer.resize(static_cast<std::size_t>(k / avx512::kInt16Block * width));
    sums_buffer.resize(scales_buffer.size());
    offsets_buffer.resize(2 * scales_buffer.size());
    avx512::quantize_columns_int8(xt_buffer.data(), k, vectors, pairs_buffer.data(),
                                  scales_buffer.data(), sums_buffer.data(), offsets_buffer.data());
  } else if (int16_activations) {
    pairs_buffer.resize(static_cast<std::size_t>(k / 2 * width));
    scales_buffer.resize(static_cast<std::size_t>(k / avx512::kInt16Block * width));
    sums_buffer.resize(scales_buffer.size());
    avx512::quantize_columns_int16(xt_buffer.data(), k, vectors, pairs_buffer.data(),
                                   scales_buffer.data(), sums_buffer.data());
  }
  // A lambda naming the thread_locals themselves would see each worker's own (empty) buffers.
  const float* xt = xt_buffer.data();
  const std::int32_t* pairs = pairs_buffer.data();
  const float* scales = scales_buffer.data();
  const float* scaled_sums = sums_buffer.data();
  const Int8Columns int8_x{.quads = pairs_buffer.data(),
                           .scales = scales,
                           .scaled_sums = scaled_sums,
                           .offsets = offsets_buffer.data()};
  dispatch(
      pool, outputs, tile_rows, [&](const MatmulOutput& out, std::int64_t begin, std::int64_t end) {
        const TensorView& w = out.w;
        const std::int64_t n = w.num_rows;
        thread_local std::vector<float> weights;
        thread_local std::vector<float> acc;
        // Zeroed so the rows past a short last tile multiply finite values (their sums are
        // dropped); the pipelined kernels keep their own buffers.
        if (!avx512::decodes(w.dtype)) {
          weights.assign(static_cast<std::size_t>(tile_rows * 2 * avx512::kBroadcastDepth), 0.0f);
        }
        acc.resize(static_cast<std::size_t>(tile_rows * width));
        for (std::int64_t tile = begin; tile < end; ++tile) {
          const std::int64_t n0 = tile * tile_rows;
          const std::int64_t count = std::min(tile_rows, n - n0);
          // int16_tile_interleaved prefetches the next panel itself.
          const std::int64_t next_rows =
              tile + 1 < end && !w.interleaved ? std::min(tile_rows, n - n0 - count) : 0;
          const std::uint8_t* next = next_rows > 0 ? w.row(n0 + count) : nullptr;
          std::fill(acc.begin(), acc.end(), 0.0f);
          if (int8_activations && w.interleaved) {
            avx512::int8_tile_interleaved(w.dtype, int8_x, vectors, k,
                                          static_cast<const std::uint8_t*>(w.data), w.row_stride,
                                          n0, count, acc.data());
          } else if (int8_activations) {
            avx512::int8_tile(w.dtype, int8_x, vectors, k, w.row(n0), w.row_stride, count, next,
                              next_rows, acc.data());
          } else if (int16_activations && w.interleaved) {
            avx512::int16_tile_interleaved(w.dtype, pairs, scales, scaled_sums, vectors, k,
                                           static_cast<const std::uint8_t*>(w.data), w.row_stride,
                                           n0, count, acc.data());
          } else if (int16_activations) {
            avx512::int16_tile(w.dtype, pairs, scales, scaled_sums, vectors, k, w.row(n0),
                               w.row_stride, count, next, next_rows, acc.data());
          } else if (avx512::decodes(w.dtype)) {
            // Q8_0 / Q4_0 / Q4_1: block decode pipelined with the FMAs inside the tile.
            avx512::broadcast_tile_quantized(w.dtype, xt, vectors, k, w.row(n0), w.row_stride,
                                             count, next, next_rows, acc.data());
          } else {
            broadcast_decoded_tile(w, n0, count, xt, vectors, tile + 1 < end, weights.data(),
                                   acc.data());
          }
          if (vectors == 1) {
            avx512::store_tile_transposed(acc.data(), count, m, out.y + n0, n);
          } else {
            for (std::int64_t i = 0; i < m; ++i) {
              for (std::int64_t r = 0; r < count; ++r) {
                out.y[i * n + n0 + r] = acc[static_cast<std::size_t>(r * width + i)];
              }
            }
          }
        }
        add_bias(out.bias, m, n, begin * tile_rows, std::min(n, end * tile_rows), out.y);
      });
}

bool matmul_supported(DType dtype) {
  return dequantize_supported(dtype);
}

MatmulKernel fp32_matmul_kernel_for(std::int64_t m) {
  if (cpu_has_avx512() && m >= kBroadcastMinRows && m <= kBroadcastMaxRows) {
    return MatmulKernel::kBroadcast;
  }
  if (cpu_has_avx512() && m >= kRowGroupMinRows && m <= kRowGroupMaxRows) {
    return MatmulKernel::kRowGroup;
  }
  return m <= kDirectMaxRows ? MatmulKernel::kDirect : MatmulKernel::kPacked;
}

MatmulKernel matmul_kernel_for(std::int64_t m) {
  if (!cpu_int16_activations()) return fp32_matmul_kernel_for(m);
  return m <= int16_direct_max_rows() ? MatmulKernel::kDirectInt16 : MatmulKernel::kBroadcastInt16;
}

void matmul(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
            const float* bias, float* y, MatmulKernel kernel) {
  const MatmulOutput output{.w = w, .bias = bias, .y = y};
  matmul_fused(pool, x, m, std::span(&output, 1), kernel);
}

void matmul_fused(ThreadPool& pool, const float* x, std::int64_t m,
                  std::span<const MatmulOutput> outputs, MatmulKernel kernel) {
  PAGODA_CHECK(!outputs.empty() && outputs.size() <= kMaxFusedOutputs) << outputs.size();
  for (const MatmulOutput& out : outputs) {
    PAGODA_CHECK(matmul_supported(out.w.dtype)) << "matmul on " << dtype_name(out.w.dtype);
    PAGODA_CHECK(m >= 0 && out.w.num_cols > 0 && out.w.num_rows > 0) << m << "x" << out.w.num_cols;
    PAGODA_CHECK_EQ(out.w.num_cols, outputs[0].w.num_cols) << "fused weights share x";
  }
  if (m == 0) return;
  if (any_input_permutation(outputs)) return matmul_permuted(pool, x, m, outputs, kernel);
  if (kernel == MatmulKernel::kAuto) kernel = matmul_kernel_for(m);
  if (kernel == MatmulKernel::kBroadcastInt16 || kernel == MatmulKernel::kDirectInt16) {
    const bool int16_weights = std::all_of(
        outputs.begin(), outputs.end(), [](const auto& out) { return int16_decodes(out.w.dtype); });
    if (!cpu_has_avx2() || !int16_weights) {
      kernel = fp32_matmul_kernel_for(m);
    } else if (m > int16_direct_max_rows()) {
      kernel = MatmulKernel::kBroadcastInt16;  // the same results
    }
  }
  if (kernel == MatmulKernel::kBroadcast && (!cpu_has_avx512() || m > kBroadcastMaxRows)) {
    kernel = MatmulKernel::kPacked;
  }
  if (kernel == MatmulKernel::kRowGroup && !cpu_has_avx512()) kernel = MatmulKernel::kPacked;
  if (kernel == MatmulKernel::kPacked && !cpu_has_avx2()) kernel = MatmulKernel::kBlasPanel;
  // The int16 kernels read interleaved panels: the direct ones and the AVX-512 tile in place, the
  // AVX2 tile a group of a tile's rows at a time; AMX tiles read rows.
  const bool reads_interleaved = kernel == MatmulKernel::kDirectInt16 ||
                                 (kernel == MatmulKernel::kBroadcastInt16 && !cpu_has_amx_int8());
  if (!reads_interleaved && std::any_of(outputs.begin(), outputs.end(),
                                        [](const auto& out) { return out.w.interleaved; })) {
    return matmul_deinterleaved(pool, x, m, outputs, kernel);
  }
  switch (kernel) {
    case MatmulKernel::kBroadcast: return matmul_broadcast(pool, x, m, outputs, false);
    case MatmulKernel::kBroadcastInt16: return matmul_broadcast_int16(pool, x, m, outputs);
    case MatmulKernel::kDirectInt16: return matmul_direct_int16(pool, x, m, outputs);
    case MatmulKernel::kRowGroup: return matmul_row_group(pool, x, m, outputs);
    case MatmulKernel::kPacked: return matmul_packed(pool, x, m, outputs);
    case MatmulKernel::kBlasPanel: return matmul_blas_panel(pool, x, m, outputs);
    default: return matmul_direct(pool, x, m, outputs);
  }
}

void matmul_reference(const float* x, std::int64_t m, const TensorView& w, const float* bias,
                      float* y) {
  if (w.input_permutation != nullptr) return matmul_reference_permuted(x, m, w, bias, y);
  const std::int64_t k = w.num_cols;
  const std::optional<std::uint64_t> row_bytes = dtype_num_bytes(w.dtype, k);
  PAGODA_CHECK(row_bytes.has_value()) << k << " " << dtype_name(w.dtype) << " columns";
  std::vector<float> row(static_cast<std::size_t>(k));
  std::vector<std::uint8_t> scratch;
  for (std::int64_t j = 0; j < w.num_rows; ++j) {
    const Status status = dequantize(w.dtype, std::span(gguf_row(w, j, scratch), *row_bytes), row);
    PAGODA_CHECK(status.ok()) << status.to_string();
    for (std::int64_t i = 0; i < m; ++i) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (std::int64_t l = 0; l < k; ++l) sum += static_cast<double>(x[i * k + l]) * row[l];
      y[i * w.num_rows + j] = static_cast<float>(sum);
    }
  }
}

}  // namespace pagoda::cpu
