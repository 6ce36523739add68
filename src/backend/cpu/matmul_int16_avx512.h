// Matmul with int16 activations and integer dot products (AVX-512 VNNI) for every weight type
// int16_decodes() names (int16_types.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K): the
// CPU's default for these weights, at every row count. The weights' own quants are already
// integers, so a block's dot product is exact in int32 whatever the order of its terms; only x is
// rounded. The block decoders are int16_blocks.h, shared with the AVX2 kernels, which implement the
// same contract bit for bit. Two kernels share it here:
//
//   int16_tile (9+ rows of x): the broadcast kernel's layout (matmul_broadcast_avx512.h): one zmm
//     holds a column of 16 rows of x, a lane two adjacent columns as int16, each weight pair is
//     broadcast into it; one vpdpwssd does 32 multiply-adds where an fp32 FMA does 16.
//   int16_direct (1-8 rows): lanes are 16 weight rows; each row's block is multiplied with x's
//     block (vpmaddwd) and the 16 products of the 16 rows are summed lane-wise in one tree.
//
// Numerics, per row i of x and 32-column block b (this is the contract the tests check bit for
// bit against a scalar transcription, tests/unit/backend/int16_contract.h):
//
//   amax   = max |x[i, c]| over the block             (fp32)
//   s      = amax / Q,  q[c] = round_half_even(x[i, c] * (Q / amax))   (0 if amax == 0)
//            Q = 32767, or 127 with int8 activations (cpu_activation_code_max(); the int8 tile,
//            matmul_int8_avx512.h, multiplies those codes as bytes)
//            a non-finite x in the block makes s NaN, so the row's outputs are NaN
//
// Weight row n's block b has S sub-blocks t (S = 2 for Q6_K, Q3_K and Q2_K: columns 0-15 and
// 16-31, else 1) with integer quants qw[c] and fp32 scale_t, min_t (weight ~= scale_t * qw[c] +
// min_t):
//
//   Q8_0 int8, d | Q4_0 nibble - 8, d | Q4_1 nibble, d, m | Q5_0 q5 - 16, d | Q5_1 q5, d, m
//   Q4_K / Q5_K (block j = b % 8 of a super-block): q, d * sc_j, -(dmin * m_j)
//   Q6_K q6 - 32, d * sc (int8 of the 16 columns) | Q3_K q3 - 4 as dequantize.cc, d * (sc6 - 32)
//   Q2_K q2, d * (sc & 15), -(dmin * (sc >> 4))
//
// and per sub-block, in order t = 0 .. S - 1:
//
//   dot_t  = sum_{c in t} q[c] * qw[c]                (int32, exact)
//   qsum_t = sum_{c in t} q[c]                        (int32, exact)
//   acc    = fma(float(dot_t), scale_t * s, acc)      then, for types with mins only,
//   acc    = fma(min_t, float(qsum_t) * s, acc)
//
// acc from 0.0f, blocks in order; y = acc (+ bias).
//
// x's rounding error is at most amax / 65534 per element (15 significant bits against fp32's
// 24, 2^7 times finer than bf16 activations), and a row's result depends on that row alone.
// K-quant rows have k a multiple of 256. Call only when cpu_has_avx512_vnni().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/int16_types.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx512 {

/// Columns of x that share one int16 scale: a weight block of every type this takes (a K-quant
/// super-block holds 8).
inline constexpr std::int64_t kInt16Block = 32;

/// Most rows of x per int16_tile call: two column vectors (see matmul_broadcast_int16).
inline constexpr std::int64_t kInt16PieceRows = 32;

/// Weight rows per tile when x spans `vectors` (1 or 2) column vectors: each (row, vector) pair
/// holds an int32 block sum and an fp32 accumulator in registers. For one vector, 12 or 16 rows
/// (more latency chains) run the matmul alone 0-7% faster but the decode step no faster
/// (docs/perf/cpu.md, session 9: the loop is bound by its epilogue's FMAs and decode's stores).
constexpr std::int64_t int16_tile_rows(std::int64_t vectors) {
  return vectors == 1 ? 8 : 6;
}

/// x, transposed and quantized for int16_tile (k a multiple of kInt16Block; 16 x vectors lanes):
/// pairs[c / 2, l] = q[l, c] | q[l, c + 1] << 16;  scales[b, l] = s;  scaled_sums[b, l] = qsum * s.
void quantize_columns_int16(const float* xt /* [k, 16 * vectors], transpose_to_columns */,
                            std::int64_t k, std::int64_t vectors,
                            std::int32_t* pairs /* [k / 2, 16 * vectors] */,
                            float* scales /* [k / 32, 16 * vectors] */,
                            float* scaled_sums /* [k / 32, 16 * vectors] */);

/// Rows of x up to which int16_direct is used. It multiplies each decoded block once per row of
/// x, the tile once per 16, but decodes each block once where the tile broadcasts it pair by pair:
/// one thread, Q4_1 1536x576, 26 vs 174 us at 1 row, 58 vs 136 at 4, 103 vs 119 at 8
/// (BM_MatmulBatchedDecode, docs/perf/cpu.md).
inline constexpr std::int64_t kInt16DirectMaxRows = 8;

/// Weight rows per int16_direct group: one per lane.
inline constexpr std::int64_t kInt16DirectGroup = 16;

/// x row by row for int16_direct (k a multiple of kInt16Block), the same values as
/// quantize_columns_int16: q[i, c];  scales[i, b] = s;  scaled_sums[i, b] = qsum * s;
/// qsums[i, b] = qsum.
void quantize_rows_int16(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                         std::int16_t* q /* [m, k] */, float* scales /* [m, k / 32] */,
                         float* scaled_sums /* [m, k / 32] */,
                         std::int32_t* qsums /* [m, k / 32] */);

/// quantize_rows_int16's x for the VNNI kernels' byte products (int16_direct's VNNI path and
/// matmul_interleaved_avx512.h): q = 256 h + l, h = q >> 8 signed, l = q & 255 unsigned, with
/// the per-block sums their offsets take off. The pointers are quantize_rows_int16's outputs.
struct Int16XBytes {
  const float* scales = nullptr;        ///< [m, k / 32] s
  const float* scaled_sums = nullptr;   ///< [m, k / 32] qsum * s
  const std::int32_t* qsums = nullptr;  ///< [m, k / 32]
  std::vector<std::int8_t> high;        ///< [m, k] h
  std::vector<std::uint8_t> low;        ///< [m, k] l
  std::vector<std::int32_t> high_sums;  ///< [m, k / 32] sum of h per block
  std::vector<std::int32_t> half_sums;  ///< [m, k / 16] sum of q per 16 columns
};

/// Fills x's high, low, high_sums and half_sums from quantize_rows_int16's q (k a multiple of
/// 32); the pointers are the caller's to set.
void split_rows_int16(const std::int16_t* q, std::int64_t m, std::int64_t k, Int16XBytes& x);

/// y[i, n] = the header's sum for the m <= kInt16DirectMaxRows rows of x (quantize_rows_int16)
/// and weight rows n in [n_begin, n_end) of an int16_decodes() type (row n at w + n * w_stride),
/// in groups of kInt16DirectGroup rows, each lane reading its own run of consecutive rows
/// (int16_kernel_loops.h's for_each_lane_group); the next group's bytes are prefetched meanwhile.
/// Q4_K, Q4_0 and Q8_0 go through VNNI's byte products on x split into bytes (with qsums taking
/// off the codes' offset) unless cpu_int16_direct_vnni() is off: the same int32 block dots, so
/// the same bits, in fewer instructions; the other types' quants are decoded signed.
void int16_direct(DType dtype, const std::int16_t* q, const float* scales, const float* scaled_sums,
                  const std::int32_t* qsums, std::int64_t m, std::int64_t k, const std::uint8_t* w,
                  std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end,
                  float* y /* [m, ldy] */, std::int64_t ldy);

/// acc[r, l] += the header's sum over all k columns for stored weight rows r < num_rows
/// <= int16_tile_rows(vectors), vectors <= 2 (row r at w + r * w_stride) of an int16_decodes()
/// type.
/// `next` (or nullptr): the first of `next_rows` rows, same stride, prefetched meanwhile (the next
/// tile).
void int16_tile(DType dtype, const std::int32_t* pairs, const float* scales,
                const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                const std::uint8_t* w /* [num_rows, k] stored */, std::size_t w_stride,
                std::int64_t num_rows, const std::uint8_t* next, std::int64_t next_rows,
                float* acc /* [int16_tile_rows(vectors), 16 * vectors] */);

/// int16_tile on weight rows n0 .. n0 + num_rows - 1 of an interleaved matrix (interleaved_rows.h:
/// row n in panel n / 16 at lane n % 16, panel p at panels + p * 16 * row_bytes) of a type
/// interleave_supported() names: the same bits as int16_tile on the row-major rows. A tile of 6
/// rows may straddle two panels. The next panel's bytes are prefetched meanwhile (where the next
/// tiles read), past the matrix's end too: a prefetch does not fault.
void int16_tile_interleaved(DType dtype, const std::int32_t* pairs, const float* scales,
                            const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                            const std::uint8_t* panels, std::size_t row_bytes /* one GGUF row */,
                            std::int64_t n0, std::int64_t num_rows,
                            float* acc /* [int16_tile_rows(vectors), 16 * vectors] */);

}  // namespace pagoda::cpu::avx512
