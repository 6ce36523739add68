// Float to narrow float encodings, round to nearest even: what the load-time quantizers store.
#pragma once

#include <cstdint>
#include <optional>

namespace pagoda::quant {

/// IEEE half bits of `value`, rounded to nearest even (overflow gives infinity).
std::uint16_t float_to_fp16(float value);

/// The fp16 bits of `value` when it is exactly representable; nullopt otherwise.
std::optional<std::uint16_t> exact_fp16(float value);

/// E4M3 ("e4m3fn") code of `value`, rounded to nearest even and saturated to +-448; NaN stays NaN.
std::uint8_t float_to_fp8_e4m3(float value);

/// The largest finite E4M3 magnitude.
inline constexpr float kFp8E4M3Max = 448.0f;

}  // namespace pagoda::quant
