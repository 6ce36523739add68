#include "model/dtype.h"

#include <array>

namespace pagoda {

namespace {

// Block sizes follow the block structs of the GGUF format (e.g. Q4_1: fp16 scale, fp16 minimum,
// 32 nibbles = 20 bytes per 32 weights; K-quants: 256-weight super-blocks).
constexpr std::array kDTypes = {
    DTypeInfo{DType::kF32, "F32", 1, 4, 0, true},
    DTypeInfo{DType::kF16, "F16", 1, 2, 1, true},
    DTypeInfo{DType::kBF16, "BF16", 1, 2, 30, true},
    DTypeInfo{DType::kF64, "F64", 1, 8, 28, true},
    DTypeInfo{DType::kI8, "I8", 1, 1, 24, true},
    DTypeInfo{DType::kI16, "I16", 1, 2, 25, true},
    DTypeInfo{DType::kI32, "I32", 1, 4, 26, true},
    DTypeInfo{DType::kI64, "I64", 1, 8, 27, true},
    DTypeInfo{DType::kU8, "U8", 1, 1, -1, true},
    DTypeInfo{DType::kU16, "U16", 1, 2, -1, true},
    DTypeInfo{DType::kU32, "U32", 1, 4, -1, true},
    DTypeInfo{DType::kU64, "U64", 1, 8, -1, true},
    DTypeInfo{DType::kBool, "BOOL", 1, 1, -1, true},
    DTypeInfo{DType::kF8E4M3, "F8_E4M3", 1, 1, -1, true},
    DTypeInfo{DType::kF8E5M2, "F8_E5M2", 1, 1, -1, true},
    DTypeInfo{DType::kF8E8M0, "F8_E8M0", 1, 1, -1, true},
    DTypeInfo{DType::kQ4_0, "Q4_0", 32, 18, 2, false},
    DTypeInfo{DType::kQ4_1, "Q4_1", 32, 20, 3, false},
    DTypeInfo{DType::kQ5_0, "Q5_0", 32, 22, 6, false},
    DTypeInfo{DType::kQ5_1, "Q5_1", 32, 24, 7, false},
    DTypeInfo{DType::kQ8_0, "Q8_0", 32, 34, 8, false},
    DTypeInfo{DType::kQ2_K, "Q2_K", 256, 84, 10, false},
    DTypeInfo{DType::kQ3_K, "Q3_K", 256, 110, 11, false},
    DTypeInfo{DType::kQ4_K, "Q4_K", 256, 144, 12, false},
    DTypeInfo{DType::kQ5_K, "Q5_K", 256, 176, 13, false},
    DTypeInfo{DType::kQ6_K, "Q6_K", 256, 210, 14, false},
    DTypeInfo{DType::kQ8_K, "Q8_K", 256, 292, 15, false},
    DTypeInfo{DType::kIQ2_XXS, "IQ2_XXS", 256, 66, 16, false},
    DTypeInfo{DType::kIQ2_XS, "IQ2_XS", 256, 74, 17, false},
    DTypeInfo{DType::kIQ3_XXS, "IQ3_XXS", 256, 98, 18, false},
    DTypeInfo{DType::kIQ1_S, "IQ1_S", 256, 50, 19, false},
    DTypeInfo{DType::kIQ4_NL, "IQ4_NL", 32, 18, 20, false},
    DTypeInfo{DType::kIQ3_S, "IQ3_S", 256, 110, 21, false},
    DTypeInfo{DType::kIQ2_S, "IQ2_S", 256, 82, 22, false},
    DTypeInfo{DType::kIQ4_XS, "IQ4_XS", 256, 136, 23, false},
    DTypeInfo{DType::kIQ1_M, "IQ1_M", 256, 56, 29, false},
    DTypeInfo{DType::kTQ1_0, "TQ1_0", 256, 54, 34, false},
    DTypeInfo{DType::kTQ2_0, "TQ2_0", 256, 66, 35, false},
    DTypeInfo{DType::kMXFP4, "MXFP4", 32, 17, 39, false},
    // fp16 d | u8 z | 16 bytes of nibbles in Q4_0's order (src/quant/q4_z_block.h).
    DTypeInfo{DType::kQ4_Z, "Q4_Z", 32, 19, -1, false},
    // fp32 s | 32 E4M3 bytes (src/quant/f8_s_block.h).
    DTypeInfo{DType::kF8_S, "F8_S", 32, 36, -1, false},
};

constexpr bool table_is_indexed_by_enum() {
  for (std::size_t i = 0; i < kDTypes.size(); ++i) {
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(table_is_indexed_by_enum(), "kDTypes must list DType values in enum order");

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)];
}

std::string_view dtype_name(DType dtype) {
  return dtype_info(dtype).name;
}

std::optional<DType> dtype_from_ggml(std::uint32_t id) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.ggml_id >= 0 && static_cast<std::uint32_t>(info.ggml_id) == id) return info.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.in_safetensors && info.name == name) return info.dtype;
  }
  return std::nullopt;
}

bool dtype_is_quantized(DType dtype) {
  return dtype_info(dtype).block_size > 1;
}

std::optional<std::uint64_t> dtype_num_bytes(DType dtype, std::uint64_t num_elements) {
  const DTypeInfo& info = dtype_info(dtype);
  const auto block_size = static_cast<std::uint64_t>(info.block_size);
  const auto block_bytes = static_cast<std::uint64_t>(info.block_bytes);
  if (num_elements % block_size != 0) return std::nullopt;
  std::uint64_t blocks = num_elements / block_size;
  if (blocks > UINT64_MAX / block_bytes) return std::nullopt;
  return blocks * block_bytes;
}

}  // namespace pagoda
