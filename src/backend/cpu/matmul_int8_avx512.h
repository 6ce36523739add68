// The int8 tile: int16_tile (matmul_int16_avx512.h) for activations rounded to 8 bits
// (cpu_int8_activations(): codes in [-127, 127], s = amax / 127), in half its dot-product
// instructions. A lane still holds one row of x, but 4 adjacent columns as bytes, and one vpdpbusd
// takes 4 columns of each of 16 rows where vpdpwssd takes 2. vpdpbusd multiplies unsigned bytes
// by signed ones, so the weights' codes c (signed bytes, as int16_blocks.h decodes them) go in as
// c + 128 and each sub-block's int32 sum starts at -128 times x's sum over it:
//
//   sum_c (qw[c] + 128) * q[c] - 128 * sum_c q[c] = sum_c qw[c] * q[c]
//
// the same exact block dots, so the same bits as int16_tile on the same x: the contract is the
// int16 kernels' (matmul_int16_avx512.h), only the range of x's codes differs. Call only when
// cpu_has_avx512_vnni().
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/int8_columns.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx512 {

/// Fills the arrays Int8Columns names (16 x vectors lanes) from xt [k, 16 * vectors]
/// (transpose_to_columns): the same fp32 operations as quantize_columns_int16 with a code maximum
/// of 127.
void quantize_columns_int8(const float* xt, std::int64_t k, std::int64_t vectors,
                           std::int32_t* quads, float* scales, float* scaled_sums,
                           std::int32_t* offsets);

/// int16_tile's sums (acc[r, l] += ..., num_rows <= int16_tile_rows(vectors), vectors <= 2) on
/// x as Int8Columns, for weight rows at w + r * w_stride of an int16_decodes() type; `next` (or
/// nullptr): the first of `next_rows` rows, prefetched meanwhile.
void int8_tile(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
               const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows, float* acc);

/// int8_tile on weight rows n0 .. n0 + num_rows - 1 of an interleaved matrix, as
/// int16_tile_interleaved reads them: the same bits as int8_tile on the row-major rows.
void int8_tile_interleaved(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
                           const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                           std::int64_t num_rows, float* acc);

}  // namespace pagoda::cpu::avx512
