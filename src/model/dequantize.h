// Reference dequantization: stored tensor bytes to float32, written from the block layouts of the
// GGUF format. Plain scalar code that mirrors the reference operation order, so results are
// bit-identical to gguf-py's numpy dequantizers; fast SIMD kernels are tested against these.
#pragma once

#include <cstdint>
#include <span>

#include "model/dtype.h"
#include "pagoda/status.h"

namespace pagoda {

/// Whether dequantize() handles `dtype`.
bool dequantize_supported(DType dtype);

/// Converts the elements stored as `dtype` in `src` into `dst`. `dst.size()` must be a multiple of
/// the block size and `src.size()` exactly the bytes those elements take.
Status dequantize(DType dtype, std::span<const std::uint8_t> src, std::span<float> dst);

/// IEEE half-precision bits to float (exact, subnormals and infinities included).
float fp16_to_float(std::uint16_t bits);
/// OCP FP8 E4M3 ("e4m3fn": no infinities, max 448) bits to float (exact).
float fp8_e4m3_to_float(std::uint8_t bits);
/// bfloat16 bits to float (exact).
float bf16_to_float(std::uint16_t bits);

}  // namespace pagoda
