#include "backend/cuda/scalar_type.h"

#include <cstring>

#include "model/dequantize.h"
#include "quant/float_codes.h"

namespace pagoda::cuda {

namespace {

std::uint32_t float_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

std::uint16_t float_to_bf16(float x) {
  const std::uint32_t bits = float_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  // Round to nearest even on the 16 dropped bits.
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace

std::string_view scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::kF32: return "f32";
    case ScalarType::kF16: return "f16";
    case ScalarType::kBF16: return "bf16";
  }
  return "?";
}

bool parse_scalar_type(std::string_view text, ScalarType* out) {
  if (text == "f32" || text == "float32" || text == "float") {
    *out = ScalarType::kF32;
  } else if (text == "f16" || text == "float16" || text == "half") {
    *out = ScalarType::kF16;
  } else if (text == "bf16" || text == "bfloat16") {
    *out = ScalarType::kBF16;
  } else {
    return false;
  }
  return true;
}

void convert_from_f32(const float* src, std::int64_t n, ScalarType type, void* dst) {
  switch (type) {
    case ScalarType::kF32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case ScalarType::kF16: {
      auto* out = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) out[i] = quant::float_to_fp16(src[i]);
      return;
    }
    case ScalarType::kBF16: {
      auto* out = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(src[i]);
      return;
    }
  }
}

void convert_to_f32(const void* src, std::int64_t n, ScalarType type, float* dst) {
  switch (type) {
    case ScalarType::kF32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case ScalarType::kF16: {
      const auto* in = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(in[i]);
      return;
    }
    case ScalarType::kBF16: {
      const auto* in = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(in[i]);
      return;
    }
  }
}

}  // namespace pagoda::cuda
