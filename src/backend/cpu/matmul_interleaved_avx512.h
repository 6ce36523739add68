// The decode kernel of interleaved weights (interleaved_rows.h), AVX-512 VNNI: 1 to 8 rows of x
// against 16 weight rows at a time, one row per 32-bit lane, read as one sequential stream.
//
// It computes the int16 contract (matmul_int16_avx512.h) bit for bit, as int16_direct does on
// row-major rows, with the same split of x that int16_direct's VNNI path uses: x's int16 q = 256 h
// + l, h = q >> 8 signed, l = q & 255 unsigned. A panel's code unit (4 bytes of each of 16 rows,
// one 64-byte load) is multiplied by 4 bytes of h broadcast (vpdpbusd, codes unsigned) and by 4
// bytes of l broadcast (vpdpbusd, codes signed), so after a block's 8 units each lane holds its
// row's two partial dots with no transposing sum:
//
//   dot(qw, q) = 256 dot(qu, h) + dot(l, qu) - c qsum       Q4_0 (c = 8), Q4_1, Q4_K, Q5_K (c = 0),
//                                                            Q6_K per 16 columns (c = 32)
//   dot(qw, q) = 256 (dot(qu, h) - 128 sum(h)) + dot(l, qw)  Q8_0 (qu = qw + 128)
//
// exact in int32, then the contract's fp32 steps in its order. With int8 activations
// (cpu_int8_activations()) h is 0 or -1 and l is q's two's complement byte, so one product on l
// as signed bytes does: dot(qw, q) = dot(qu, q) - c qsum (Q8_0: c = 128).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_int16_avx512.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx512 {

/// y[i, n] for the m <= kInt16DirectMaxRows rows of x (split_rows_int16, pointers set) and the
/// weight rows n of panels [panel_begin, panel_end) of an interleaved matrix of num_rows rows (rows
/// past num_rows are not stored). row_bytes: one GGUF row's bytes. Call only when
/// cpu_has_avx512_vnni().
void interleaved_direct(DType dtype, const Int16XBytes& x, std::int64_t m, std::int64_t k,
                        const std::uint8_t* panels, std::size_t row_bytes, std::int64_t num_rows,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t ldy);

}  // namespace pagoda::cpu::avx512
