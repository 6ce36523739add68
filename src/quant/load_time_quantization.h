// `--quantization`: quantize an unquantized model's linear layers while loading it.
#pragma once

#include <cstdint>
#include <string_view>

#include "pagoda/status.h"

namespace pagoda::quant {

/// What the loader does to unquantized linear weights.
enum class LoadTimeQuantization : std::uint8_t {
  kNone,  ///< Use the weights as stored.
  kFp8,   ///< E4M3 with per-output-channel scales (F8_S).
  kInt4,  ///< 4-bit round-to-nearest, asymmetric, group 128 (Q4_Z).
};

/// "none", "fp8", "int4".
std::string_view load_time_quantization_name(LoadTimeQuantization q);

/// Parses a `--quantization` value; INVALID_ARGUMENT naming the accepted values otherwise.
StatusOr<LoadTimeQuantization> parse_load_time_quantization(std::string_view text);

}  // namespace pagoda::quant
