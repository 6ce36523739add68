#include "quant/float_codes.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "common/vector_clones.h"
#include "model/dequantize.h"

namespace pagoda::quant {

std::uint16_t float_to_fp16(float value) {
#if defined(__FLT16_MANT_DIG__)
  // The compiler's _Float16 (F16C's vcvtps2ph where the ISA has it) rounds to nearest even.
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
#else
  return float_to_fp16_by_bits(value);  // Clang before 15 has no _Float16 on x86-64
#endif
}

std::uint16_t float_to_fp16_by_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);   // NaN
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520
  if (magnitude < 0x38800000u) {
    // A half subnormal (or zero): 2^24 makes its ulp 1, and nearbyint rounds to nearest even.
    const float steps = std::nearbyint(std::bit_cast<float>(magnitude) * 0x1p24f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(steps));
  }
  // Rebias the exponent (127 -> 15) and drop 13 mantissa bits, rounding to nearest even; a carry
  // moves into the exponent as the rounding demands.
  const std::uint32_t rebased = magnitude - ((127u - 15u) << 23);
  const std::uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
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

// float_to_fp8_e4m3 as selects: each branch's result is computed and the one that applies kept.
// The subnormal steps round with the 2^23 trick: adding 2^23 to a value below 2^22 rounds it to
// an integer, to nearest even as nearbyint does in the default rounding mode, and leaves that
// integer in the sum's low mantissa bits. The cases are picked with masks: GCC moves float
// operations whose result a select may drop into a branch, which stops the vectorizer.
PAGODA_VECTOR_CLONES void fp8_e4m3_codes(const float* values, float scale, std::uint8_t* codes,
                                         std::int64_t n) {
  constexpr std::uint32_t kMaxBits = std::bit_cast<std::uint32_t>(kFp8E4M3Max);
  constexpr std::uint32_t kSmallestNormalBits = std::bit_cast<std::uint32_t>(0x1p-6f);
  constexpr std::uint32_t kTwoTo23Bits = std::bit_cast<std::uint32_t>(0x1p23f);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(values[i] / scale);
    const std::uint32_t sign = (bits >> 24) & 0x80u;
    const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
    const std::uint32_t rounded = magnitude + 0x7FFFFu + ((magnitude >> 20) & 1u);
    std::uint32_t code = (rounded >> 20) - ((127u - 7u) << 3);
    code = code > 0x7Eu ? 0x7Eu : code;
    // Clamped so that every lane's sum stays below 2^24, used or not.
    const std::uint32_t small = magnitude < kSmallestNormalBits ? magnitude : kSmallestNormalBits;
    const std::uint32_t steps =
        std::bit_cast<std::uint32_t>(std::bit_cast<float>(small) * 512.0f + 0x1p23f) - kTwoTo23Bits;
    const std::uint32_t subnormal = 0u - std::uint32_t{magnitude < kSmallestNormalBits};
    const std::uint32_t saturated = 0u - std::uint32_t{magnitude >= kMaxBits};
    const std::uint32_t nan = 0u - std::uint32_t{magnitude > 0x7F800000u};
    code = (steps & subnormal) | (code & ~subnormal);
    code = (0x7Eu & saturated) | (code & ~saturated);
    code |= sign;
    codes[i] = static_cast<std::uint8_t>((0x7Fu & nan) | (code & ~nan));
  }
}

// Over the magnitudes' bits: for non-NaN floats they order as the values do.
PAGODA_VECTOR_CLONES float max_magnitude(const float* values, std::int64_t n) {
  std::uint32_t largest = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t magnitude = std::bit_cast<std::uint32_t>(values[i]) & 0x7FFFFFFFu;
    // A mask rather than a select, which GCC turns into a branch that stops the vectorizer.
    const std::uint32_t counted = magnitude & (0u - std::uint32_t{magnitude <= 0x7F800000u});
    largest = std::max(largest, counted);
  }
  return std::bit_cast<float>(largest);
}

}  // namespace pagoda::quant
