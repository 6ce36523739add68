// The reference dequantizers against gguf-py's numpy dequantization
// (tests/golden/model/make_gguf_golden.py): bit for bit on synthetic blocks of every type and on
// every tensor of the real SmolLM2 file.
#include "model/dequantize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gguf_file.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/model/";
const std::string kModel =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

std::vector<float> dequantize_tensor(const GgufTensorInfo& t) {
  std::vector<float> out(t.num_elements);
  Status s = dequantize(t.dtype, t.data, out);
  EXPECT_TRUE(s.ok()) << t.name << ": " << s.to_string();
  return out;
}

// The checksum the golden script computes: sum of float bits times (2i + 1), mod 2^64.
std::string checksum(const std::vector<float>& values) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    total += static_cast<std::uint64_t>(std::bit_cast<std::uint32_t>(values[i])) * (2 * i + 1);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(total));
  return hex;
}

TEST(DequantizeTest, SyntheticBlocksMatchGgufBitForBit) {
  auto file = GgufFile::open(kDataDir + "quants.gguf");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  int checked = 0;
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    if (t.name.starts_with("expected.") || t.name.starts_with("plain.")) continue;
    SCOPED_TRACE(t.name);
    const GgufTensorInfo* expected = (*file)->find_tensor("expected." + t.name);
    ASSERT_NE(expected, nullptr);
    ASSERT_EQ(expected->dtype, DType::kF32);
    const std::vector<float> want = dequantize_tensor(*expected);
    const std::vector<float> got = dequantize_tensor(t);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
    }
    ++checked;
  }
  EXPECT_EQ(checked, 19);  // random blocks of 12 types, gguf-quantized weights of 7
}

TEST(DequantizeTest, Fp16MatchesCompilerConversionForEveryValue) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float want = static_cast<float>(std::bit_cast<_Float16>(h));
    const float got = fp16_to_float(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << bits;
    }
  }
}

TEST(DequantizeTest, RejectsUnsupportedTypesAndWrongSizes) {
  std::vector<std::uint8_t> bytes(292);
  std::vector<float> out(256);
  EXPECT_EQ(dequantize(DType::kQ8_K, bytes, out).code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(dequantize_supported(DType::kIQ2_XXS));
  EXPECT_TRUE(dequantize_supported(DType::kQ6_K));
  std::vector<float> partial(31);
  std::vector<std::uint8_t> q4(18);
  EXPECT_EQ(dequantize(DType::kQ4_0, q4, partial).code(), StatusCode::kInvalidArgument);
  std::vector<float> block(32);
  EXPECT_EQ(dequantize(DType::kQ4_0, bytes, block).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(dequantize(DType::kQ4_0, q4, block).ok());
}

TEST(DequantizeTest, SmolLm2MatchesGgufBitForBit) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " absent; run scripts/setup.sh";
  std::ifstream in(kDataDir + "smollm2_dequant.json");
  const json golden = json::parse(in);
  auto file = GgufFile::open(kModel);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ((*file)->tensors().size(), golden["tensors"].size());
  for (const json& entry : golden["tensors"]) {
    const std::string name = entry["name"];
    SCOPED_TRACE(name);
    const GgufTensorInfo* t = (*file)->find_tensor(name);
    ASSERT_NE(t, nullptr);
    const std::vector<float> values = dequantize_tensor(*t);
    const std::size_t row = t->dims[0];
    const auto head = entry["first_row_head"].get<std::vector<float>>();
    const auto tail = entry["last_row_tail"].get<std::vector<float>>();
    EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + head.size()), head);
    EXPECT_EQ(std::vector<float>(values.end() - tail.size(), values.end()), tail);
    double sum = 0;
    double sum_squares = 0;
    for (float v : values) {
      sum += v;
      sum_squares += static_cast<double>(v) * v;
    }
    EXPECT_NEAR(sum, entry["sum"].get<double>(), 1e-6 * (1 + std::abs(sum_squares)));
    EXPECT_NEAR(sum_squares, entry["sum_squares"].get<double>(), 1e-9 * sum_squares);
    EXPECT_EQ(checksum(values), entry["checksum"].get<std::string>()) << "rows of " << row;
  }
}

}  // namespace
}  // namespace pagoda
