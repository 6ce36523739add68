// The GGUF reader against what the PyPI `gguf` package reads from the same files
// (tests/golden/model/make_gguf_golden.py made the JSON).
#include "model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/model/";
const std::string kModel =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::unique_ptr<GgufFile> open_or_die(const std::string& path) {
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return file.ok() ? std::move(file).value() : nullptr;
}

// Compares one metadata entry with its golden description (see field_json in the script).
void expect_metadata_matches(const GgufFile& file, const json& entry) {
  const std::string key = entry["key"];
  SCOPED_TRACE(key);
  const GgufValue* value = file.find(key);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(gguf_value_type_name(value->type), entry["type"].get<std::string>());
  if (entry.contains("value")) {
    const json& expected = entry["value"];
    if (expected.is_string()) {
      EXPECT_EQ(file.get_string(key), expected.get<std::string>());
    } else if (expected.is_boolean()) {
      EXPECT_EQ(file.get_bool(key), expected.get<bool>());
    } else if (expected.is_number_float()) {
      EXPECT_EQ(file.get_float(key), expected.get<double>());
    } else if (expected.is_number_unsigned() && expected.get<std::uint64_t>() > INT64_MAX) {
      EXPECT_EQ(file.get_int(key), std::nullopt);  // does not fit int64
      EXPECT_EQ(std::get<std::uint64_t>(value->value), expected.get<std::uint64_t>());
    } else {
      EXPECT_EQ(file.get_int(key), expected.get<std::int64_t>());
    }
    return;
  }
  EXPECT_EQ(gguf_value_type_name(value->element_type), entry["element_type"].get<std::string>());
  if (entry.contains("leaves")) {
    std::vector<std::int64_t> leaves;
    for (std::size_t i = 0; i < value->array_size(); ++i) {
      const GgufValue inner = value->element(i);
      for (std::size_t j = 0; j < inner.array_size(); ++j) {
        leaves.push_back(*inner.element(j).as_int());
      }
    }
    EXPECT_EQ(leaves, entry["leaves"].get<std::vector<std::int64_t>>());
    return;
  }
  const std::size_t count = entry["count"];
  ASSERT_EQ(value->array_size(), count);
  const json& head = entry["head"];
  const json& tail = entry["tail"];
  auto check = [&](const json& expected, std::size_t first) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const GgufValue got = value->element(first + i);
      if (expected[i].is_string()) {
        EXPECT_EQ(got.as_string(), expected[i].get<std::string>());
      } else if (expected[i].is_boolean()) {
        EXPECT_EQ(got.as_bool(), expected[i].get<bool>());
      } else {
        EXPECT_EQ(got.as_float(), expected[i].get<double>());
      }
    }
  };
  check(head, 0);
  check(tail, count - tail.size());
}

void expect_tensors_match(const GgufFile& file, const json& golden) {
  const json& tensors = golden["tensors"];
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, tensors[i]["name"].get<std::string>());
    EXPECT_EQ(dtype_name(t.dtype), tensors[i]["type"].get<std::string>());
    EXPECT_EQ(t.dims, tensors[i]["dims"].get<std::vector<std::uint64_t>>());
    EXPECT_EQ(file.data_offset() + t.offset, tensors[i]["file_offset"].get<std::uint64_t>());
    if (tensors[i].contains("n_bytes")) {
      EXPECT_EQ(t.num_bytes, tensors[i]["n_bytes"].get<std::uint64_t>());
      EXPECT_EQ(t.num_elements, tensors[i]["n_elements"].get<std::uint64_t>());
    }
    EXPECT_EQ(t.data.size(), t.num_bytes);
    EXPECT_EQ(file.find_tensor(t.name), &t);
  }
}

class ValueTypesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ValueTypesTest, MatchesGgufPackage) {
  const json golden = load_json(kDataDir + "value_types.json");
  auto file = open_or_die(kDataDir + GetParam());
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->version(), GetParam() == "value_types_v2.gguf" ? 2u : 3u);
  EXPECT_EQ(file->alignment(), golden["alignment"].get<std::uint64_t>());
  EXPECT_EQ(file->data_offset(), golden["data_offset"].get<std::uint64_t>());
  ASSERT_EQ(file->metadata().size(), golden["metadata"].size());
  for (std::size_t i = 0; i < golden["metadata"].size(); ++i) {
    EXPECT_EQ(file->metadata()[i].key, golden["metadata"][i]["key"].get<std::string>());
    expect_metadata_matches(*file, golden["metadata"][i]);
  }
  expect_tensors_match(*file, golden);
  const GgufTensorInfo* t = file->find_tensor("t.tensor");
  ASSERT_NE(t, nullptr);
  std::vector<float> values(t->num_elements);
  std::memcpy(values.data(), t->data.data(), t->num_bytes);
  EXPECT_EQ(values, golden["tensors"][0]["values"].get<std::vector<float>>());
}

INSTANTIATE_TEST_SUITE_P(Versions, ValueTypesTest,
                         ::testing::Values("value_types_v2.gguf", "value_types_v3.gguf"));

TEST(GgufFileTest, TypedAccessorsConvertOnlyWhatFits) {
  auto file = open_or_die(kDataDir + "value_types_v3.gguf");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->get_int("t.u32"), 4000000000);
  EXPECT_EQ(file->get_int("t.f32"), std::nullopt);
  EXPECT_EQ(file->get_int("t.true"), std::nullopt);
  EXPECT_EQ(file->get_float("t.i16"), -30000.0);
  EXPECT_EQ(file->get_bool("t.u8"), std::nullopt);
  EXPECT_EQ(file->get_string("t.u8"), std::nullopt);
  EXPECT_EQ(file->get_string("absent.key"), std::nullopt);
  EXPECT_FALSE(file->has_key("absent.key"));
  EXPECT_TRUE(file->has_key("t.str"));
  EXPECT_EQ(file->get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "ünï"}));
  EXPECT_EQ(file->get_int_array("t.arr_i32"), (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(file->get_float_array("t.arr_f32"), (std::vector<double>{0.5, -1.25}));
  EXPECT_EQ(file->get_float_array("t.arr_i32"), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(file->get_int_array("t.arr_str"), std::nullopt);
  EXPECT_EQ(file->get_string_array("t.str"), std::nullopt);
  EXPECT_EQ(file->get_int_array("t.nested"), std::nullopt);
}

TEST(GgufFileTest, SmolLm2MatchesGgufPackage) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " absent; run scripts/setup.sh";
  const json golden = load_json(kDataDir + "smollm2_gguf.json");
  auto file = open_or_die(kModel);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->version(), golden["version"].get<std::uint32_t>());
  EXPECT_EQ(file->alignment(), golden["alignment"].get<std::uint64_t>());
  EXPECT_EQ(file->data_offset(), golden["data_offset"].get<std::uint64_t>());
  ASSERT_EQ(file->metadata().size(), golden["metadata"].size());
  for (const json& entry : golden["metadata"]) expect_metadata_matches(*file, entry);
  expect_tensors_match(*file, golden);
  EXPECT_EQ(file->get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.merges")->size(), 48900u);
}

TEST(GgufFileTest, VocabOnlyFilesHaveNoTensors) {
  for (const char* name : {"ggml-vocab-llama-spm", "ggml-vocab-llama-bpe", "ggml-vocab-qwen2"}) {
    const std::string path = std::string(PAGODA_SOURCE_DIR) + "/models/vocab/" + name + ".gguf";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent; run scripts/setup.sh";
    auto file = open_or_die(path);
    ASSERT_NE(file, nullptr);
    EXPECT_TRUE(file->tensors().empty());
    EXPECT_TRUE(file->get_string("tokenizer.ggml.model").has_value()) << name;
  }
}

}  // namespace
}  // namespace pagoda
