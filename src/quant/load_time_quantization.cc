#include "quant/load_time_quantization.h"

#include <string>

namespace pagoda::quant {

std::string_view load_time_quantization_name(LoadTimeQuantization q) {
  switch (q) {
    case LoadTimeQuantization::kNone: return "none";
    case LoadTimeQuantization::kFp8: return "fp8";
    case LoadTimeQuantization::kInt4: return "int4";
  }
  return "?";
}

StatusOr<LoadTimeQuantization> parse_load_time_quantization(std::string_view text) {
  if (text == "none") return LoadTimeQuantization::kNone;
  if (text == "fp8") return LoadTimeQuantization::kFp8;
  if (text == "int4") return LoadTimeQuantization::kInt4;
  return invalid_argument("--quantization \"" + std::string(text) +
                          "\" is not supported; use none, fp8 or int4");
}

}  // namespace pagoda::quant
