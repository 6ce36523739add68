// gpu_bench kernels w4a16 / gguf / fp8: the quantized GEMMs as ratios to same-run cuBLASLt BF16
// (G6, G7), to B (FP8 at decode's m) or to F (G8).
#pragma once

#include "backend/cuda/blas_lt.h"
#include "bench/cuda/bench_util.h"

namespace pagoda::bench {

/// G6 / G7: W4A16 at group 128 on Llama-3-8B shapes, M = 1 to 256, beside dequantize + cuBLASLt.
void bench_w4a16(const Ceilings& ceil, cuda::BlasLt& blas);

/// GGUF types kept quantized (the W4A16 kernel's GGUF form) on the same shapes.
void bench_gguf(cuda::BlasLt& blas);

/// FP8 W8A8 at decode's m (1, 4, 16): the skinny kernel beside cuBLASLt, weight bytes against B.
void bench_fp8_decode(const Ceilings& ceil, cuda::BlasLt& blas);

/// G8: FP8 W8A8 at prefill shapes.
void bench_fp8(const Ceilings& ceil, cuda::BlasLt& blas);

}  // namespace pagoda::bench
