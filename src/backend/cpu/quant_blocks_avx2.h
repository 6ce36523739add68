// AVX2 decoders for Pagoda's load-time block layouts (Q4_Z, F8_S; src/quant/), entered from
// decode_blocks (row_decoder.cc) after a runtime check, so every matmul kernel that decodes rows
// reads them. Bit-identical to the reference dequantizer (one exact or single-rounded multiply).
#pragma once

#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::quant_avx2 {

/// Whether decode() handles `dtype`.
constexpr bool decodes(DType dtype) {
  return dtype == DType::kQ4_Z || dtype == DType::kF8_S;
}

/// Decodes `count` elements (a multiple of 32) from the block at `src`. Call only when
/// cpu_has_avx2().
void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst /* [count] */);

}  // namespace pagoda::cpu::quant_avx2
