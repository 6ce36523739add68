// AVX-512 decode-time matmul kernel (matmul_avx512.cc): 16 lanes halve the instructions per
// weight block, which is what bounds 4-bit decode (it is not memory-bound at 8 lanes). Call only
// when cpu_has_avx512(); raw-pointer signatures for the reason given in matmul_avx2.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::avx512 {

/// Whether matmul_direct below handles `dtype` (Q8_0, Q4_0, Q4_1).
constexpr bool decodes(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1;
}

/// As avx2::matmul_direct: y[i, n] = x[i, :] · W[n, :] for i < m, n_begin <= n < n_end.
void matmul_direct(DType dtype, const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                   const float* x_block_sums /* [m, k / 32] */,
                   const std::uint8_t* w /* [N, k] stored rows */, std::size_t w_stride,
                   std::int64_t n_begin, std::int64_t n_end, float* y /* [m, ldy] */,
                   std::int64_t ldy);

/// Decodes `count` (a multiple of 32) weights of a `decodes(dtype)` type to fp32, rounded as
/// the reference dequantizer rounds them (scale * q, then + min).
void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst /* [count] */);

/// Weight rows per group of dot_rows.
inline constexpr std::int64_t kRowGroup = 4;

/// y[i, j] = x[i, :] · rows[j, :] for i < m, j < num_rows <= kRowGroup; `rows` holds kRowGroup
/// weight rows already decoded to fp32 (rows past num_rows are read but their results dropped).
void dot_rows(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
              const float* rows /* [kRowGroup, k] */, std::int64_t num_rows,
              float* y /* [m, ldy] */, std::int64_t ldy);

}  // namespace pagoda::cpu::avx512
