// Element types of activations, weights and the KV cache on the GPU. Host-only header: no CUDA
// types, so planning code and tests can name a dtype without a CUDA compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagoda::cuda {

/// FP32 is for tests (exact comparison with the CPU backend); BF16 and FP16 are what runs.
enum class ScalarType : std::uint8_t { kF32, kF16, kBF16 };

/// Bytes per element.
constexpr std::size_t scalar_type_size(ScalarType type) {
  return type == ScalarType::kF32 ? 4 : 2;
}

/// "f32", "f16", "bf16".
std::string_view scalar_type_name(ScalarType type);

/// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16"; false when unknown.
bool parse_scalar_type(std::string_view text, ScalarType* out);

/// Rounds fp32 values to `type` (round to nearest even) into `dst` (`n` elements of `type`).
void convert_from_f32(const float* src, std::int64_t n, ScalarType type, void* dst);

/// Widens `n` elements of `type` at `src` to fp32.
void convert_to_f32(const void* src, std::int64_t n, ScalarType type, float* dst);

}  // namespace pagoda::cuda
