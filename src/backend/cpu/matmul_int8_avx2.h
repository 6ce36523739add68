// The AVX2 int8 tile: avx512::int8_tile (matmul_int8_avx512.h) in 8 lanes, for CPUs with AVX-VNNI
// (cpu_int16_avx_vnni(): Alder Lake and later, Zen 5), whose VEX vpdpbusd takes 4 columns of x as
// bytes against the weights' codes offset by 128 where vpdpwssd takes 2: the same exact block dots,
// so the same bits as avx2::int16_tile on the same int8-range x. AVX2 CPUs without it run int8
// activations on the int16 kernels (vpmaddubsw's int16 sums would saturate on offset codes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/int8_columns.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx2 {

/// The m <= 8 * vectors rows of x [m, k] quantized with codes up to 127 and laid out as
/// Int8Columns names (8 x vectors lanes; lanes l >= m zero).
void quantize_columns_int8(const float* x, std::int64_t m, std::int64_t k, std::int64_t vectors,
                           std::int32_t* quads, float* scales, float* scaled_sums,
                           std::int32_t* offsets);

/// avx2::int16_tile's sums on x as Int8Columns (num_rows <= int16_tile_rows(vectors),
/// vectors <= 2). Call only when cpu_int16_avx_vnni().
void int8_tile(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
               const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows, float* acc);

/// avx2::int16_tile_interleaved's sums on x as Int8Columns (num_rows <=
/// int16_panel_tile_rows(vectors), all in one panel). Call only when cpu_int16_avx_vnni().
void int8_tile_interleaved(DType dtype, const Int8Columns& x, std::int64_t vectors, std::int64_t k,
                           const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                           std::int64_t num_rows, float* acc);

}  // namespace pagoda::cpu::avx2
