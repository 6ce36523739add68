// AVX2 fp32 decoders for the GGUF types the older AVX2 block decoders (matmul_avx2.h: Q8_0, Q4_0,
// Q4_1) do not take: Q5_0, Q5_1 and the K-quants Q2_K..Q6_K. Entered from decode_blocks
// (row_decoder.cc) after a runtime check, so the fp32 kernels that decode rows (kDirect's
// decode_row path, kBroadcast's decoded tiles, kPacked, kRowGroup) stop running the scalar
// reference dequantizer on them: the int16 kernels' fallback (PAGODA_CPU_INT16=0, CPUs without
// VNNI). The integer quants and scales come from int16_blocks.h; the weights are bit-identical to
// the reference dequantizer's (scale * q, then + min, each rounded once).
#pragma once

#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::kquant_avx2 {

/// Whether decode() handles `dtype`.
constexpr bool decodes(DType dtype) {
  switch (dtype) {
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return true;
    default: return false;
  }
}

/// Decodes `count` elements (whole blocks of the type) from the block at `src`. Call only when
/// cpu_has_avx2().
void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst /* [count] */);

}  // namespace pagoda::cpu::kquant_avx2
