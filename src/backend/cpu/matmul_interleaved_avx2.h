// The AVX2 twin of matmul_interleaved_avx512.h: int16 x times weights in 16-row panels
// (interleaved_rows.h), for 1 to 8 rows of x, computing the int16 contract bit for bit
// (matmul_int16_avx512.h; tests/unit/backend/int16_contract.h).
//
// A panel's 64-byte unit holds 4 bytes of each of its 16 rows, so its two 32-byte halves are two
// ymm with one row per 32-bit lane (rows 0-7, then 8-15). Without VNNI's byte products each half
// is widened in place to int16: the even bytes of every lane (columns c, c + 2) and the odd ones
// (c + 1, c + 3), each multiplied by x's matching pair of int16 broadcast (vpmaddwd), so a lane
// sums its own row's 4 columns with no shuffle across rows (on CPUs with AVX-VNNI, one vpdpwssd
// per pair instead of vpmaddwd + vpaddd: cpu_int16_avx_vnni()). The codes' offsets (Q4_0's 8,
// Q6_K's 32) come off the block dot as offset x the sum of x's q over the block (or 16 columns),
// and the fp32 steps are the contract's, in its order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::avx2 {

/// y[i, n] for the m <= 8 rows of x (quantize_rows_int16: q [m, k], scales and scaled_sums
/// [m, k / 32]) and the rows n of panels [panel_begin, panel_end) of an interleaved matrix of
/// `num_rows` rows (row_bytes per GGUF row), of an interleave_supported() type.
void interleaved_direct(DType dtype, const std::int16_t* q, const float* scales,
                        const float* scaled_sums, std::int64_t m, std::int64_t k,
                        const std::uint8_t* panels, std::size_t row_bytes, std::int64_t num_rows,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t ldy);

}  // namespace pagoda::cpu::avx2
