// The weight types the int16-activation matmul kernels take (every ISA's: the block decoders are
// shared, int16_blocks.h). ISA-neutral, so the dispatch in matmul.cc can ask without AVX flags.
#pragma once

#include "model/dtype.h"

namespace pagoda::cpu {

/// Whether the int16 kernels (kDirectInt16, kBroadcastInt16) take weights of `dtype`.
constexpr bool int16_decodes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
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

}  // namespace pagoda::cpu
