// The safetensors reader against what the `safetensors` package wrote and reads back
// (tests/golden/model/make_hf_golden.py), and against broken headers.
#include "model/safetensors_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/dequantize.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/model/";

json load_golden() {
  std::ifstream in(kDataDir + "hf_golden.json");
  return json::parse(in);
}

// Element i of `t` widened to double, whatever its dtype.
double element(const SafetensorsTensor& t, std::size_t i) {
  const std::uint8_t* p = t.data.data() + i * dtype_info(t.dtype).block_bytes;
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<double>(v);
  };
  switch (t.dtype) {
    case DType::kF32: return load(float{});
    case DType::kF64: return static_cast<float>(load(double{}));  // golden holds float32 values
    case DType::kF16: return fp16_to_float(static_cast<std::uint16_t>(load(std::uint16_t{})));
    case DType::kBF16: return bf16_to_float(static_cast<std::uint16_t>(load(std::uint16_t{})));
    case DType::kI64: return load(std::int64_t{});
    case DType::kI32: return load(std::int32_t{});
    case DType::kI8: return load(std::int8_t{});
    case DType::kU8:
    case DType::kBool: return load(std::uint8_t{});
    default: ADD_FAILURE() << "unexpected dtype"; return 0;
  }
}

const std::map<std::string, DType> kTorchDtypes = {
    {"float32", DType::kF32}, {"float16", DType::kF16}, {"bfloat16", DType::kBF16},
    {"float64", DType::kF64}, {"int64", DType::kI64},   {"int32", DType::kI32},
    {"int8", DType::kI8},     {"uint8", DType::kU8},    {"bool", DType::kBool},
};

TEST(SafetensorsFileTest, EveryDtypeMatchesSafetensorsPackage) {
  const json golden = load_golden()["folders"]["hf_llama"]["tensors"];
  auto file = SafetensorsFile::open(kDataDir + "hf_llama/extra.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  int checked = 0;
  for (const json& g : golden) {
    if (g["file"] != "extra.safetensors") continue;
    const std::string name = g["name"];
    SCOPED_TRACE(name);
    const SafetensorsTensor* t = (*file)->find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, kTorchDtypes.at(g["dtype"]));
    EXPECT_EQ(t->shape, g["shape"].get<std::vector<std::uint64_t>>());
    const auto values = g["values"].get<std::vector<double>>();
    ASSERT_EQ(t->data.size(), values.size() * dtype_info(t->dtype).block_bytes);
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(element(*t, i), values[i]) << i;
    ++checked;
  }
  EXPECT_EQ(checked, 9);
  EXPECT_EQ((*file)->tensors().size(), 9u);
  EXPECT_EQ((*file)->metadata().at("note"), "golden");
}

TEST(SafetensorsFileTest, TensorsComeInDataOrder) {
  auto file = SafetensorsFile::open(kDataDir + "hf_llama/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto& tensors = (*file)->tensors();
  ASSERT_FALSE(tensors.empty());
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    EXPECT_LE(tensors[i - 1].end, tensors[i].begin);
  }
}

std::vector<std::uint8_t> file_bytes(const std::string& header, std::size_t data_size) {
  std::vector<std::uint8_t> bytes(8);
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_size, 0);
  return bytes;
}

void expect_error(const std::vector<std::uint8_t>& bytes, const std::string& problem) {
  auto file = SafetensorsFile::parse("bad.safetensors", bytes, nullptr);
  ASSERT_FALSE(file.ok()) << "expected an error about: " << problem;
  EXPECT_EQ(file.status().message().rfind("bad.safetensors: ", 0), 0u) << file.status().message();
  EXPECT_NE(file.status().message().find(problem), std::string::npos) << file.status().message();
}

TEST(SafetensorsFileTest, ValidHandWrittenHeaderParses) {
  auto file = SafetensorsFile::parse(
      "ok.safetensors", file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      nullptr);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
}

TEST(SafetensorsFileTest, BadFiles) {
  expect_error({1, 2, 3}, "too short for the 8-byte header length");
  std::vector<std::uint8_t> huge(16, 0);
  huge[7] = 0x10;
  expect_error(huge, "header length 1152921504606846976 exceeds the file size 16");
  expect_error(file_bytes("{not json", 0), "header is not a JSON object");
  expect_error(file_bytes("[1, 2]", 0), "header is not a JSON object");
  expect_error(file_bytes(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4),
               "tensor 'a' needs a string dtype");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4),
               "tensor 'a' needs");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
               "tensor 'a' has a shape entry that is not a count");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
               "tensor 'a' data [0, 8) lies outside the data section of 4 bytes");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
               "tensor 'a' holds 8 bytes but its shape and F32 dtype need 12");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                          R"("data_offsets":[0,8]}})",
                          8),
               "overflows int64");
  expect_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
               "tensors 'a' and 'b' overlap");
  expect_error(file_bytes(R"({"__metadata__":{"k":1}})", 0), "__metadata__ value 'k'");
}

TEST(SafetensorsFileTest, UnknownDtypeIsUnimplemented) {
  auto file = SafetensorsFile::parse(
      "f4.safetensors", file_bytes(R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1),
      nullptr);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(file.status().message().find("tensor 'a' has dtype F4"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
