// Matmul with int16 activations and integer dot products on AVX2 (vpmaddwd: 16 int16
// multiply-adds per instruction, pairs summed into int32): the AVX2 twin of
// matmul_int16_avx512.h, for the same weight types (int16_decodes(), int16_types.h) and the SAME
// numerical contract bit for bit (see that header; tests/unit/backend/int16_contract.h is its
// scalar transcription), so AVX2 and AVX-512 CPUs compute identical results. The block decoders
// are int16_blocks.h, shared with the AVX-512 kernels. Two kernels:
//
//   int16_direct (1 to kInt16DirectMaxRows rows of x): lanes are 8 weight rows; each row's block
//     is decoded once per pass, multiplied with x's block (2 vpmaddwd) and the 8 rows' products
//     are summed lane-wise by a horizontal-add tree, whole 32-column (or 16-column) sub-blocks in
//     int32 before the conversion to float.
//   int16_tile (more rows, in pieces of up to kInt16PieceRows): x transposed so one ymm holds a
//     column pair of 8 rows of x as int16 pairs; each weight pair is broadcast into it (vpmaddwd +
//     vpaddd per row and vector, or one VEX vpdpwssd where the CPU has AVX-VNNI: 1.4-1.5x,
//     PAGODA_CPU_AVX_VNNI=0 turns it off), and after each sub-block the integer sums join fp32
//     accumulators with the contract's FMAs. int16_tile_interleaved runs it on interleaved
//     panels in place (int16_tile_rows.h's PanelTile, the AVX-512 tile's reader).
//
// A row's result depends on that row alone, in both kernels. Call only when cpu_has_avx2().
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/int16_types.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx2 {

/// Columns of x that share one int16 scale: a weight block of every type these kernels take.
inline constexpr std::int64_t kInt16Block = 32;

/// Rows of x in one column vector of int16_tile.
inline constexpr std::int64_t kInt16Lanes = 8;

/// Most rows of x per int16_tile call: two column vectors.
inline constexpr std::int64_t kInt16PieceRows = 16;

/// Weight rows per tile when x spans `vectors` (1 or 2) column vectors: each (row, vector) pair
/// holds an int32 sum in a register while the pairs stream past (16 ymm registers).
constexpr std::int64_t int16_tile_rows(std::int64_t vectors) {
  return vectors == 1 ? 12 : 6;
}

/// Weight rows per tile of int16_tile_interleaved: tiles stay inside a panel, so a panel is two
/// tiles of 8 (one vector of x) or three of 6, 6 and 4 (two vectors; 4 is the most a tile from
/// lane 12 holds).
constexpr std::int64_t int16_panel_tile_rows(std::int64_t vectors) {
  return vectors == 1 ? 8 : 6;
}

/// Rows of x up to which int16_direct is used: AVX-512's crossover, not yet re-measured on AVX2
/// (at 4 rows direct already beats the fp32 kernels, at 16 the tile does: docs/perf/cpu.md,
/// "int16 activations on AVX2").
inline constexpr std::int64_t kInt16DirectMaxRows = 8;

/// Weight rows per int16_direct group: one per lane.
inline constexpr std::int64_t kInt16DirectGroup = 8;

/// x row by row (k a multiple of kInt16Block), bit for bit avx512::quantize_rows_int16: q[i, c];
/// scales[i, b] = s;  scaled_sums[i, b] = qsum * s;  qsums[i, b] = qsum.
void quantize_rows_int16(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                         std::int16_t* q /* [m, k] */, float* scales /* [m, k / 32] */,
                         float* scaled_sums /* [m, k / 32] */,
                         std::int32_t* qsums /* [m, k / 32] */);
/// quantize_rows_int16 with codes up to `code_max` whatever cpu_activation_code_max() says (127:
/// the int8 tile's x, matmul_int8_avx2.h).
void quantize_rows_to(float code_max, const float* x, std::int64_t m, std::int64_t k,
                      std::int16_t* q, float* scales, float* scaled_sums, std::int32_t* qsums);

/// The column quantizers' shared first step: x's m rows quantized as quantize_rows_to(code_max),
/// their block scales and scaled sums stored transposed, scales[b, l] and scaled_sums[b, l]
/// (lanes l >= m zero), and their codes q [m, k] returned in this thread's scratch (valid until
/// its next call) for the caller to lay out as its tile reads them.
const std::int16_t* quantize_rows_scratch(float code_max, const float* x, std::int64_t m,
                                          std::int64_t k, std::int64_t width,
                                          float* scales /* [k / 32, width] */,
                                          float* scaled_sums /* [k / 32, width] */);

/// The m <= 8 * vectors rows of x quantized as quantize_rows_int16 and transposed for int16_tile:
/// pairs[c / 2, l] = q[l, c] | q[l, c + 1] << 16;  scales[b, l] = s;  scaled_sums[b, l] = qsum * s
/// (lanes l >= m zero).
void quantize_columns_int16(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                            std::int64_t vectors, std::int32_t* pairs /* [k / 2, 8 * vectors] */,
                            float* scales /* [k / 32, 8 * vectors] */,
                            float* scaled_sums /* [k / 32, 8 * vectors] */);

/// y[i, n] = the contract's sum for the m <= kInt16DirectMaxRows rows of x (quantize_rows_int16)
/// and weight rows n in [n_begin, n_end) of an int16_decodes() type (row n at w + n * w_stride),
/// in groups of kInt16DirectGroup rows, each lane reading its own run of consecutive rows
/// (int16_kernel_loops.h's for_each_lane_group); the next group's bytes are prefetched meanwhile.
void int16_direct(DType dtype, const std::int16_t* q, const float* scales, const float* scaled_sums,
                  std::int64_t m, std::int64_t k, const std::uint8_t* w, std::size_t w_stride,
                  std::int64_t n_begin, std::int64_t n_end, float* y /* [m, ldy] */,
                  std::int64_t ldy);

/// acc[r, l] += the contract's sum over all k columns for stored weight rows r < num_rows
/// <= int16_tile_rows(vectors), vectors <= 2 (row r at w + r * w_stride) of an int16_decodes()
/// type, x from quantize_columns_int16. `next` (or nullptr): the first of `next_rows` rows, same
/// stride, prefetched meanwhile (the next tile).
void int16_tile(DType dtype, const std::int32_t* pairs, const float* scales,
                const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                const std::uint8_t* w /* [num_rows, k] stored */, std::size_t w_stride,
                std::int64_t num_rows, const std::uint8_t* next, std::int64_t next_rows,
                float* acc /* [int16_tile_rows(vectors), 8 * vectors] */);

/// int16_tile on weight rows n0 .. n0 + num_rows - 1 of an interleaved matrix (interleaved_rows.h:
/// row n in panel n / 16 at lane n % 16, panel p at panels + p * 16 * row_bytes) of a type
/// interleave_supported() names, num_rows <= int16_panel_tile_rows(vectors) and all in one panel:
/// the same bits as int16_tile on the row-major rows. The next panel's bytes are prefetched
/// meanwhile, past the matrix's end too: a prefetch does not fault.
void int16_tile_interleaved(DType dtype, const std::int32_t* pairs, const float* scales,
                            const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                            const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                            std::int64_t num_rows,
                            float* acc /* [int16_panel_tile_rows(vectors), 8 * vectors] */);

}  // namespace pagoda::cpu::avx2
