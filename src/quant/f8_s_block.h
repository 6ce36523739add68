// F8_S: Pagoda's FP8 block, the CPU layout FP8 checkpoints and `--quantization fp8` become.
//
//   byte 0-3   fp32 s       the scale of these 32 weights (per tensor, channel or tile, repeated)
//   byte 4-35  32 x E4M3    the weights' FP8 codes
//
// weight = s * e4m3(f), one fp32 rounding. The CPU multiplies these with fp32 activations
// (W8A16 numerics); the GPU path is planned as W8A8 with per-token activation scales.
#pragma once

#include <cstdint>
#include <cstring>

namespace pagoda::quant {

inline constexpr int kF8SBlockBytes = 36;

/// Writes one block of 32 E4M3 codes and their scale.
inline void write_f8_s_block(float scale, const std::uint8_t codes[32],
                             std::uint8_t* dst /* [36] */) {
  std::memcpy(dst, &scale, sizeof(scale));
  std::memcpy(dst + 4, codes, 32);
}

}  // namespace pagoda::quant
