// The GPU's W4A16 weight layout: 4-bit weights with an fp16 scale and an integer zero per
// (output row, group of input columns), the nibbles reshuffled so that one 16-byte load per lane
// is exactly the tensor-core B fragments of four mma.m16n8k16 steps (kernels/gemm/w4a16_gemm.h).
// Built on the host from the CPU's exact layouts (Q4_Z for GPTQ / AWQ / int4 RTN, GGUF Q4_0), so
// the weights the GPU multiplies are the same numbers, w = d * (q - z), with no rounding added.
//
// GGUF's other block types take a second form, the GGUF form (gguf_repack.h), whose scales are
// factored the way the file stores them, so that no product of two stored numbers has to be
// rounded to fp16:
//
//   w = S[group >> super_shift] * sc[group] * (q - code_zero)  +  B[group >> super_shift] *
//   mc[group]
//
// S, B fp16 (a super-block's d and -dmin, or a block's d and m), sc, mc int8 (a K-quant's 6-bit
// sub-block scale and min; 1 for the 32-blocks), q a 4-bit code, or a 5-, 6- or 8-bit one whose
// bits above the low nibble (hi_bits of them) live in a second array, `packed_hi`. Each product
// S * sc is exact in fp32 (11 x 8 significant bits), and so is its product with q - code_zero
// (at most 8 more); the min term is absent for the types without one.
//
// packed_hi holds hi_bits words per lane per tile (tile-row-major like packed, lane-major within
// a tile). For lane l, step s and nibble pair i of `packed`, the high bits sit at bit position
// p = (4 s + i) * hi_bits of the lane's words, counted within 16-bit halves: word p / 16, shift
// p % 16 (low half: the pair's first element; + 16: its second). With hi_bits 4 this is exactly
// packed's own layout; with 1 or 2 a lane's high bits for a whole tile take one or two words.
//
// Tiles of 16 output rows x 64 input columns, 128 words each, stored tile-row-major
// (tile (nt, kt) at word (nt * k_tiles + kt) * 128). Lane l (g = l / 4, t = l % 4) owns words
// 4l .. 4l+3; word s holds the 16-column step s of the tile, and in it the nibble pair i (bits
// 4i..4i+3 and 16+4i..16+4i+3) is the B-fragment register b[i % 2] of n-tile i / 2:
//
//   pair i, low nibble:  row 16 nt + 8 (i / 2) + g, column 64 kt + 16 s + 2t + 8 (i % 2)
//   pair i, high nibble: the same row, the next column
//
// so `(word >> 4i) & 0x000F000F | magic` is two 16-bit floats {magic + q_lo, magic + q_hi} in
// the fragment's order. Rows past `rows` and columns past `cols` hold q = 0, scale 0.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pagoda/status.h"
#include "quant/quantized_matrix.h"

#if defined(__CUDACC__)
#define PAGODA_W4A16_HD __host__ __device__ __forceinline__
#else
#define PAGODA_W4A16_HD inline
#endif

namespace pagoda::quant {

inline constexpr std::int64_t kW4A16TileRows = 16;
inline constexpr std::int64_t kW4A16TileCols = 64;
inline constexpr std::int64_t kW4A16TileWords = 128;

/// Where the high bits (hi_bits of them) of stored weight (row, col) live in packed_hi, for a
/// matrix of `k_tiles` column tiles: the word index and the bit shift (host and device).
PAGODA_W4A16_HD void w4a16_hi_slot(std::int64_t row, std::int64_t col, std::int64_t k_tiles,
                                   int hi_bits, std::int64_t* word, int* shift) {
  const std::int64_t in_tile_row = row % kW4A16TileRows, in_tile_col = col % kW4A16TileCols;
  const std::int64_t g = in_tile_row % 8, step = in_tile_col / 16, c = in_tile_col % 16;
  const std::int64_t lane = 4 * g + (c % 8) / 2;
  const std::int64_t pair = 2 * (in_tile_row / 8) + c / 8;
  const std::int64_t p = (4 * step + pair) * hi_bits;
  const std::int64_t tile = (row / kW4A16TileRows) * k_tiles + col / kW4A16TileCols;
  *word = (tile * 32 + lane) * hi_bits + p / 16;
  *shift = static_cast<int>(p % 16 + 16 * (c % 2));
}

/// Where the code of stored weight (row, col) lives, for a matrix of `k_tiles` column tiles: the
/// word index in `packed` and the bit shift in it (the inverse of the map above; host and device).
PAGODA_W4A16_HD void w4a16_slot(std::int64_t row, std::int64_t col, std::int64_t k_tiles,
                                std::int64_t* word, int* shift) {
  const std::int64_t in_tile_row = row % kW4A16TileRows, in_tile_col = col % kW4A16TileCols;
  const std::int64_t g = in_tile_row % 8, step = in_tile_col / 16, c = in_tile_col % 16;
  const std::int64_t lane = 4 * g + (c % 8) / 2;
  const std::int64_t pair = 2 * (in_tile_row / 8) + c / 8;
  *word =
      ((row / kW4A16TileRows) * k_tiles + col / kW4A16TileCols) * kW4A16TileWords + 4 * lane + step;
  *shift = static_cast<int>(4 * pair + 16 * (c % 2));
}

struct W4A16Matrix {
  std::int64_t rows = 0;  ///< output channels (n)
  std::int64_t cols = 0;  ///< input channels (k), as stored (see input_permutation)
  /// Consecutive stored columns sharing a scale and zero: a multiple of 32 (cols for per-channel
  /// scales; the kernel reads the last group's scale for the zero padding past cols). The GGUF
  /// form: 32, or 16 (Q6_K).
  std::int64_t group_size = 0;
  std::vector<std::uint32_t> packed;  ///< row_tiles() * k_tiles() * 128 words: codes' low nibbles
  /// fp16 bits: [groups()][padded_rows()]; the GGUF form's S: [scale_groups()][padded_rows()].
  std::vector<std::uint16_t> scales;
  std::vector<std::uint8_t> zeros;  ///< 0..16, [groups()][padded_rows()]; empty in the GGUF form
  /// [cols] or empty, as QuantizedMatrix: stored column j multiplies x[:, input_permutation[j]].
  std::vector<std::int32_t> input_permutation;

  // The GGUF form (empty scale_codes: the zero-point form above).
  std::vector<std::uint32_t> packed_hi;  ///< codes' bits above the low nibble (see above)
  std::vector<std::int8_t> scale_codes;  ///< sc, [groups()][padded_rows()]
  std::vector<std::uint16_t> mins;       ///< B, fp16 bits, [scale_groups()][padded_rows()] or empty
  std::vector<std::int8_t> min_codes;    ///< mc, [groups()][padded_rows()] (with mins)
  int super_shift = 0;                   ///< groups per S and B: 1 << super_shift
  int code_zero = 0;                     ///< subtracted from every code (0..128)
  int hi_bits = 0;                       ///< code bits in packed_hi: 0, 1, 2 or 4

  std::int64_t row_tiles() const { return (rows + kW4A16TileRows - 1) / kW4A16TileRows; }
  std::int64_t k_tiles() const { return (cols + kW4A16TileCols - 1) / kW4A16TileCols; }
  std::int64_t padded_rows() const { return row_tiles() * kW4A16TileRows; }
  std::int64_t groups() const { return (cols + group_size - 1) / group_size; }
  std::int64_t scale_groups() const { return ((groups() - 1) >> super_shift) + 1; }
  bool gguf_form() const { return !scale_codes.empty(); }
  /// Codes of 5, 6 or 8 bits (hi_bits 1, 2, 4): the W8A16 kind.
  bool wide_codes() const { return hi_bits > 0; }
  /// Bytes the GPU holds for this matrix (every array above but the permutation).
  std::size_t device_bytes() const {
    return (packed.size() + packed_hi.size()) * sizeof(std::uint32_t) +
           (scales.size() + mins.size()) * sizeof(std::uint16_t) + zeros.size() +
           scale_codes.size() + min_codes.size();
  }
};

/// A matrix of zero codes, scales and zeros (or, `gguf_form`, codes and mins) for the repackers
/// to fill; `hi_bits` > 0 adds packed_hi.
W4A16Matrix w4a16_empty(std::int64_t rows, std::int64_t cols, std::int64_t group_size,
                        bool gguf_form, int hi_bits);

/// Fills m's tiles: `fill(n, codes)` writes row n's codes (cols of them, zeroed before) and
/// whatever scales it owns; rows go 16 at a time into a band that is then packed into its tiles
/// from the words' side. Bands run in parallel (up to 16 threads), so `fill` must only write
/// row n's entries.
void w4a16_fill_bands(W4A16Matrix& m, const std::function<void(std::int64_t, std::uint8_t*)>& fill);

/// Repacks a Q4_Z matrix (GPTQ, AWQ, int4 RTN). Its group_size is kept when every 32-block of a
/// group repeats the group's scale and zero (as the checkpoint repackers write them); otherwise
/// each 32-block is its own group, which is always exact.
StatusOr<W4A16Matrix> repack_w4a16(const QuantizedMatrix& matrix);

/// Repacks GGUF Q4_0 rows ([rows, cols], 18-byte blocks: fp16 d, 16 bytes of nibbles in the
/// Q4_Z order): w = d * (q - 8), groups of 32.
StatusOr<W4A16Matrix> repack_w4a16_q4_0(const std::uint8_t* blocks, std::int64_t rows,
                                        std::int64_t cols);

/// The code q (below 2^(4 + hi_bits)) of stored weight (row, col), read back from the packed
/// tiles.
int w4a16_code(const W4A16Matrix& m, std::int64_t row, std::int64_t col);

/// The weight at (row, col) read back from the packed layout, in float: d * (q - z) (exact), or
/// in the GGUF form (S * sc) * (q - code_zero) + B * mc, the product exact and the sum rounded
/// once, in the order the CPU's reference dequantizer rounds it.
float w4a16_weight(const W4A16Matrix& m, std::int64_t row, std::int64_t col);

/// The GGUF form's additive term B * mc at (row, col) (0 without one): what a test's error bound
/// needs besides |w| (the kernel sums the two terms apart).
float w4a16_min_term(const W4A16Matrix& m, std::int64_t row, std::int64_t col);

}  // namespace pagoda::quant
