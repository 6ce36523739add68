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

std::uint8_t float_to_fp8_e4m3(float value) {
  if (std::isnan(value)) return 0x7F;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude >= kFp8E4M3Max) return sign | 0x7E;
  // nearbyint rounds to nearest even in the default rounding mode; the scalings are exact.
  if (magnitude < 0x1p-6f) {
    // Subnormals step by 2^-9; 8 steps is the smallest normal, whose code is also 8.
    return sign | static_cast<std::uint8_t>(std::nearbyint(magnitude * 512.0f));
  }
  int exponent = std::ilogb(magnitude);
  int mantissa = static_cast<int>(std::nearbyint((std::ldexp(magnitude, -exponent) - 1.0f) * 8));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  const int code = ((exponent + 7) << 3) | mantissa;
  return sign | static_cast<std::uint8_t>(code > 0x7E ? 0x7E : code);
}

}  // namespace pagoda::quant
