// The dtype table against gguf-py's GGML_QUANT_SIZES (tests/data/model/ggml_types.json).
#include "model/dtype.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace pagoda {
namespace {

TEST(DTypeTest, GgmlTypesMatchGgufPackage) {
  std::ifstream in(std::string(PAGODA_TEST_DATA_DIR) + "/model/ggml_types.json");
  const nlohmann::json golden = nlohmann::json::parse(in)["types"];
  // Q8_1 exists only inside ggml's matmul (gguf-py even disagrees with ggml on its size);
  // NVFP4 and Q1_0 are newer than this table. None appears in model files we serve.
  const std::set<std::string> not_in_table = {"Q8_1", "NVFP4", "Q1_0"};
  int matched = 0;
  for (const auto& [name, entry] : golden.items()) {
    SCOPED_TRACE(name);
    const std::optional<DType> dtype = dtype_from_ggml(entry[0].get<std::uint32_t>());
    if (not_in_table.count(name) != 0) {
      EXPECT_FALSE(dtype.has_value());
      continue;
    }
    ASSERT_TRUE(dtype.has_value());
    const DTypeInfo& info = dtype_info(*dtype);
    EXPECT_EQ(info.name, name);
    EXPECT_EQ(info.block_size, entry[1].get<int>());
    EXPECT_EQ(info.block_bytes, entry[2].get<int>());
    ++matched;
  }
  EXPECT_EQ(matched, static_cast<int>(golden.size() - not_in_table.size()));
}

TEST(DTypeTest, SafetensorsNamesAndSizes) {
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::kBF16);
  EXPECT_EQ(dtype_from_safetensors("BOOL"), DType::kBool);
  EXPECT_EQ(dtype_from_safetensors("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(dtype_from_safetensors("Q4_0"), std::nullopt);  // a ggml type, not a safetensors one
  EXPECT_EQ(dtype_from_safetensors("F4"), std::nullopt);
  EXPECT_EQ(dtype_num_bytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(dtype_num_bytes(DType::kQ4_K, 100), std::nullopt);
  EXPECT_EQ(dtype_num_bytes(DType::kF64, UINT64_MAX / 4), std::nullopt);
  EXPECT_TRUE(dtype_is_quantized(DType::kQ8_0));
  EXPECT_FALSE(dtype_is_quantized(DType::kBF16));
}

}  // namespace
}  // namespace pagoda
