// A GGUF weight's rows repacked at load, 16 at a time, so that a decode kernel reads one
// sequential stream and keeps one weight row per 32-bit lane (matmul_interleaved_avx512.h):
//
//   panel p = rows 16p .. 16p + 15 (rows past the matrix are zeros), 16 * row_bytes bytes
//   panel p's group g (a GGUF block, or a K-quant super-block) = its 16 rows' group g, the same
//   16 * group_bytes bytes rearranged field by field (interleave_segments):
//
//     segment (offset o, bytes n, unit u) of the group:  16 * n bytes, unit i of row r at
//     (i * 16 + r) * u, holding the row's bytes o + i * u .. + u - 1
//
// Code runs take u = 4, so the 64 bytes at (i * 16) * 4 hold 4 bytes of codes of every row, one
// row per 32-bit lane: a vpdpbusd against 4 bytes of x broadcast sums 4 columns of all 16 rows.
// Headers take u = 2 (an fp16 d: 16 rows' d in one 256-bit load) or their own word size, so the
// kernels load them where the row-major layout needs a gather. The bytes are the file's, only
// moved: a matrix takes ceil(rows / 16) * 16 * row_bytes bytes.
//
//   type  group  segments (offset, bytes, unit), in stored order
//   Q8_0  34     d (0, 2, 2) | qs (2, 32, 4)
//   Q4_0  18     d (0, 2, 2) | qs (2, 16, 4)         qs byte c: column c low, c + 16 high
//   Q4_1  20     d (0, 2, 2) | m (2, 2, 2) | qs (4, 16, 4)
//   Q5_0  22     d (0, 2, 2) | qh (2, 4, 4) | qs (6, 16, 4)   qh bit c: column c's fifth bit
//   Q5_1  24     d (0, 2, 2) | m (2, 2, 2) | qh (4, 4, 4) | qs (8, 16, 4)
//   Q4_K  144    d (0, 2, 2) | dmin (2, 2, 2) | scales (4, 12, 4) | qs (16, 128, 4)
//   Q5_K  176    d (0, 2, 2) | dmin (2, 2, 2) | scales (4, 12, 4) | qh (16, 32, 4)
//                | qs (48, 128, 4)
//   Q6_K  210    d (208, 2, 2) | scales (192, 16, 1) | ql (0, 64, 4) | qh (128, 32, 4)
//                | ql (64, 64, 4) | qh (160, 32, 4)      (a 128-column half's bytes together)
//
// The int16 decode kernels and tiles read it in place (AVX-512 VNNI, and AVX2 where
// cpu_interleave_weights() allows; the AVX2 tile past 32 rows of x deinterleaves whole panels
// first, deinterleave_panel_avx2), and every other reader the rows it needs (deinterleave_rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/tensor_view.h"
#include "model/dtype.h"

namespace pagoda::cpu {

/// Rows per panel: one per 32-bit lane of a zmm.
inline constexpr std::int64_t kInterleavedRows = 16;

/// A run of a GGUF group's bytes and how its panel stores it (above).
struct InterleaveSegment {
  int offset = 0;  ///< first byte in the row's group
  int bytes = 0;   ///< length in the row's group
  int unit = 0;    ///< bytes kept together per row: 1, 2 or 4
};

/// The segments of `dtype`'s group in stored order; empty if the type is not interleaved.
std::span<const InterleaveSegment> interleave_segments(DType dtype);

/// Whether `dtype` has an interleaved layout (the table above).
inline bool interleave_supported(DType dtype) {
  return !interleave_segments(dtype).empty();
}

/// A matrix repacked into panels; the view points into `bytes`.
struct InterleavedMatrix {
  std::vector<std::uint8_t> bytes;
  TensorView view;  ///< interleaved = true, row_stride = the GGUF row's bytes
};

/// `w` (row-major, an interleave_supported type, no input permutation) repacked into panels.
InterleavedMatrix interleave_rows(const TensorView& w);

/// Rows [row_begin, row_end) of the interleaved `w` as GGUF rows: row row_begin + i at
/// out + i * w.row_stride.
void deinterleave_rows(const TensorView& w, std::int64_t row_begin, std::int64_t row_end,
                       std::uint8_t* out);

/// deinterleave_rows for the rows of panel `panel` (at most 16, fewer in the last panel), with
/// AVX2 transposes of each 8 x 8 block of 4-byte units: several times faster than the per-unit
/// copies, for kernels that read rows and stream panels (the AVX2 int16 tile). Call only when
/// cpu_has_avx2().
void deinterleave_panel_avx2(const TensorView& w, std::int64_t panel, std::uint8_t* out);

/// The bytes of row `row` of `w` as a GGUF row: w.row(row) for a row-major view, else the row
/// deinterleaved into `scratch` (resized to w.row_stride).
const std::uint8_t* gguf_row(const TensorView& w, std::int64_t row,
                             std::vector<std::uint8_t>& scratch);

}  // namespace pagoda::cpu
