// Q4_Z: Pagoda's 4-bit block with an integer zero point, the CPU layout GPTQ, AWQ and int4-RTN
// weights are repacked into.
//
//   byte 0-1   fp16 d       the group's scale, as the checkpoint stores it
//   byte 2     u8 z         the group's zero point (0..16: GPTQ v1 stores zero - 1)
//   byte 3-18  16 x u8      nibbles in Q4_0's order: byte j = element j (low) | element j+16 (high)
//
// weight = d * (q - z); q - z is an integer in [-16, 15], so the fp32 product is exact and the
// weights are exactly those the checkpoint defines. (Q4_1 cannot say this in general: its
// minimum m = -d * z is itself rounded to fp16.)
#pragma once

#include <cstdint>

namespace pagoda::quant {

inline constexpr int kQ4ZBlockBytes = 19;

/// Writes one block from 32 quants q[j] in [0, 15].
inline void write_q4_z_block(std::uint16_t scale_fp16, std::uint8_t zero, const std::uint8_t q[32],
                             std::uint8_t* dst /* [19] */) {
  dst[0] = static_cast<std::uint8_t>(scale_fp16 & 0xFF);
  dst[1] = static_cast<std::uint8_t>(scale_fp16 >> 8);
  dst[2] = zero;
  for (int j = 0; j < 16; ++j) dst[3 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
}

}  // namespace pagoda::quant
