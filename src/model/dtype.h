// Element types of stored tensors: the ggml types a GGUF file names by number and the dtypes a
// safetensors header names by string, in one enum so the rest of the engine sees one vocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda {

/// A tensor element type. Quantized types store `block_size` elements in `block_bytes` bytes.
enum class DType : std::uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ3_XXS,
  kIQ1_S,
  kIQ4_NL,
  kIQ3_S,
  kIQ2_S,
  kIQ4_XS,
  kIQ1_M,
  kTQ1_0,
  kTQ2_0,
  kMXFP4,
  // Pagoda's own load-time layouts (src/quant/), never stored in a file: checkpoints quantized
  // by other tools are repacked into them so the CPU kernels decode them like ggml blocks.
  kQ4_Z,  ///< 32 x 4-bit q, fp16 scale d, integer zero z: x = d * (q - z) (GPTQ, AWQ, int4 RTN).
  kF8_S,  ///< 32 x E4M3 f, fp32 scale s: x = s * f (FP8 per-tensor, per-channel or block scales).
};

/// Storage layout of one DType.
struct DTypeInfo {
  DType dtype;
  std::string_view name;    ///< As gguf-py prints ggml types ("Q4_1") or safetensors spells dtypes.
  std::int32_t block_size;  ///< Elements per block; 1 for plain types.
  std::int32_t block_bytes;  ///< Bytes per block.
  std::int32_t ggml_id;      ///< The number a GGUF tensor info stores; -1 when GGUF has none.
  bool in_safetensors;       ///< Whether a safetensors header may name it (by `name`).
};

/// The layout of `dtype`.
const DTypeInfo& dtype_info(DType dtype);
/// "F32", "Q4_K", "BOOL", ...
std::string_view dtype_name(DType dtype);
/// The DType a GGUF file means by ggml type number `id`; nullopt when unknown.
std::optional<DType> dtype_from_ggml(std::uint32_t id);
/// The DType a safetensors header means by `name` ("BF16"); nullopt when unknown.
std::optional<DType> dtype_from_safetensors(std::string_view name);
/// Whether the type stores blocks of several elements with shared scales.
bool dtype_is_quantized(DType dtype);
/// Bytes that `num_elements` elements occupy; nullopt when they do not fill whole blocks or the
/// size overflows 64 bits.
std::optional<std::uint64_t> dtype_num_bytes(DType dtype, std::uint64_t num_elements);

}  // namespace pagoda
