// AVX2 + FMA + F16C matmul kernels (matmul_avx2.cc). Call only when cpu_has_avx2(). The
// signatures use raw pointers on purpose: no inline helper from a shared header may be compiled
// with AVX2 flags (the linker could pick that copy for baseline callers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::avx2 {

/// Panel width of gemm_packed: output columns (weight rows) per packed panel.
inline constexpr std::int64_t kPanelCols = 16;

/// Whether the kernels below decode `dtype` (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
constexpr bool decodes(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1;
}

/// y[i, n] = x[i, :] · W[n, :] for i < m, n_begin <= n < n_end, weights decoded into registers.
/// `x_block_sums` [m, k/32] holds sums of x over each 32-wide block (Q4_1 only, else unused).
void matmul_direct(DType dtype, const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                   const float* x_block_sums /* [m, k / 32] */,
                   const std::uint8_t* w /* [N, k] stored rows */, std::size_t w_stride,
                   std::int64_t n_begin, std::int64_t n_end, float* y /* [m, ldy] */,
                   std::int64_t ldy);

/// Sums of x over each 32-wide block of each row.
void block_sums(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                float* sums /* [m, k / 32] */);

/// Decodes `count` elements starting at the block at `src` (count a multiple of the block size
/// for quantized types) into fp32, rounding exactly as the reference dequantizer does.
void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst /* [count] */);

/// y[i, j] (+)= x[i, 0:kc] · panel[0:kc, j] for i < m, j < num_cols <= kPanelCols; `accumulate`
/// adds to y instead of overwriting it.
void gemm_packed(const float* x /* [m, ldx] */, std::int64_t m, std::int64_t ldx,
                 const float* panel /* [kc, kPanelCols] */, std::int64_t kc,
                 float* y /* [m, ldy] */, std::int64_t ldy, std::int64_t num_cols, bool accumulate);

}  // namespace pagoda::cpu::avx2
