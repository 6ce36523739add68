// Float to narrow float encodings, round to nearest even: what the load-time quantizers store.
#pragma once

#include <cstdint>
#include <optional>

namespace pagoda::quant {

/// IEEE half bits of `value`, rounded to nearest even (overflow gives infinity).
std::uint16_t float_to_fp16(float value);
/// float_to_fp16 by integer arithmetic, for compilers without _Float16 (and its test's oracle).
std::uint16_t float_to_fp16_by_bits(float value);

/// The fp16 bits of `value` when it is exactly representable; nullopt otherwise.
std::optional<std::uint16_t> exact_fp16(float value);

/// E4M3 ("e4m3fn") code of `value`, rounded to nearest even and saturated to +-448; NaN stays NaN.
std::uint8_t float_to_fp8_e4m3(float value);

/// codes[i] = float_to_fp8_e4m3(values[i] / scale) for i < n, the same bits, written branch-free
/// so that each ISA's clone vectorizes it: the load-time quantizers encode every weight of a
/// model this way.
void fp8_e4m3_codes(const float* values, float scale, std::uint8_t* codes, std::int64_t n);

/// The largest |values[i]| that is not NaN (0 when none is), as folding std::max over them gives.
float max_magnitude(const float* values, std::int64_t n);

/// The largest finite E4M3 magnitude.
inline constexpr float kFp8E4M3Max = 448.0f;

}  // namespace pagoda::quant
