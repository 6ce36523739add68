#include "quant/float_codes.h"

#include <bit>
#include <cmath>

#include "model/dequantize.h"

namespace pagoda::quant {

std::uint16_t float_to_fp16(float value) {
  // GCC and Clang convert _Float16 with the IEEE rounding (to nearest even) on x86-64.
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
}

std::optional<std::uint16_t> exact_fp16(float value) {
  const std::uint16_t bits = float_to_fp16(value);
  if (fp16_to_float(bits) != value || std::isnan(value)) return std::nullopt;
  return bits;
}

// Bit arithmetic rather than ilogb / ldexp / nearbyint: --quantization fp8 encodes every weight
// of a model (7 billion for an 8B one at --load-format dummy), and the library calls took ~20 ns
// each. Same results: a normal magnitude's mantissa has 23 bits, of which e4m3 keeps 3, so
// adding 2^19 - 1 plus the kept part's lowest bit rounds the low 20 bits to nearest even, a
// carry moving into the exponent as the rounding demands; rebiasing the exponent (127 -> 7)
// then leaves the code.
std::uint8_t float_to_fp8_e4m3(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80);
  std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7F;  // NaN
  if (magnitude >= std::bit_cast<std::uint32_t>(kFp8E4M3Max)) return sign | 0x7E;
  if (magnitude < std::bit_cast<std::uint32_t>(0x1p-6f)) {
    // Subnormals step by 2^-9 (exact scaling; nearbyint rounds to nearest even); 8 steps is the
    // smallest normal, whose code is also 8.
    const float steps = std::nearbyint(std::bit_cast<float>(magnitude) * 512.0f);
    return sign | static_cast<std::uint8_t>(steps);
  }
  magnitude += 0x7FFFFu + ((magnitude >> 20) & 1u);
  const std::uint32_t code = (magnitude >> 20) - ((127u - 7u) << 3);
  return sign | static_cast<std::uint8_t>(code > 0x7E ? 0x7E : code);
}

}  // namespace pagoda::quant
