// The int16 tile's integer products on AMX-INT8 tiles (Sapphire Rapids and later Xeons): the
// contract of matmul_int16_avx512.h, bit for bit, for 9 or more rows of x and the types with one
// scale per 32 columns (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K).
//
// A block's exact dot sum_c q[c] * qw[c] (q the int16 activation, qw the weight's integer code,
// -128..127) is split over q's bytes, q = 256 * h + l + 128 with h = q >> 8 and l = (q & 255) -
// 128, both signed bytes, so one tdpbssd (s8 x s8) takes both:
//
//   dot = 256 * sum_c h[c] qw[c] + sum_c l[c] qw[c] + 128 * sum_c qw[c]
//
// every term an exact int32 (|dot| < 2^31 for every type), so the sums equal the AVX-512
// kernels' and the fp32 epilogue is theirs, operation for operation (bench/cpu/amx_probe.cc
// checks such a split on the hardware). An A tile holds 8 rows of x as 16 tile rows (their h in
// rows 0-7, their l in rows 8-15); one tdpbssd multiplies them by 16 weight rows over one block.
//
//   x tiles A: per 8 rows of x, [h of the 8 rows; l of the 8 rows], one block wide, read in
//              place from split_bytes' [m_pad / 8][16][k]
//   weights B: per 16 weight rows and block, the codes in tdpbssd's layout
//              B[c / 4][4 n + c % 4] = qw[n][c], and 128 * sum_c qw[c], decoded once per 16 rows
//              for all tiles of x; two such tiles (32 rows) share each A
//   per (8 x rows, 32 weight rows, block): the two C tiles stored, then per x row i and weight
//   tile a zmm over its 16 rows: acc = fma(float(dot), scale * s[i], acc) (+ the min term), while
//   the next block's products run in the other set of C tiles
//
// One tile product (16 x 16 x 32, 18 cycles) and its C store (17) outweigh the contract's fp32
// join only when the join is once per 32 columns: the two-scale types (Q2_K, Q3_K, Q6_K, a scale
// per 16 columns) would halve K and measured slower than the AVX-512 tile (Q6_K at 16-128 rows of
// x: 0.82-1.01x), so they stay there (docs/perf/cpu.md, "AMX"). Call only when
// cpu_has_amx_int8().
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::amx {

/// Rows of x per A tile (each twice: high and low bytes).
inline constexpr std::int64_t kTileRows = 8;

/// Whether the AMX kernel takes weights of `dtype`: the int16_decodes() types with one scale per
/// 32 columns.
bool takes(DType dtype);

/// q [m_pad, k] (quantize_rows_int16, rows past m zero, m_pad a multiple of kTileRows) as the
/// kernel's A tiles: per kTileRows rows of q, their q >> 8, then their (q & 255) - 128, as signed
/// bytes ([m_pad / 8][16][k]).
void split_bytes(const std::int16_t* q, std::int64_t m_pad, std::int64_t k, std::int8_t* split);

/// y[i, n] = the contract's sum for rows i < m of x and weight rows n in [n_begin, n_end) of w (a
/// takes() type; row n at w + n * w_stride). split from split_bytes, scales / scaled_sums
/// [m_pad, k / 32] from quantize_rows_int16 (zero past m).
void int16_tiles(DType dtype, const std::int8_t* split, const float* scales,
                 const float* scaled_sums, std::int64_t m, std::int64_t k, const std::uint8_t* w,
                 std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end,
                 float* y /* [m, ldy] */, std::int64_t ldy);

}  // namespace pagoda::cpu::amx
