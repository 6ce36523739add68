// Broken Hugging Face folders: each gives an error naming the file and the problem.
#include "model/hf_directory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/hf_config.h"
#include "model/model_files.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/model/";

// A private copy of a golden folder that a test may break.
class HfDirectoryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string copy_of(const std::string& name) {
    dir_ = fs::path(::testing::TempDir()) /
           ("pagoda_hf_" + name + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(kDataDir + name, dir_, fs::copy_options::recursive);
    return dir_.string();
  }

  void write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ / file, std::ios::trunc) << text;
  }

  json read(const std::string& file) {
    std::ifstream in(dir_ / file);
    return json::parse(in);
  }

  void expect_error(const std::string& problem) {
    auto opened = open_hf_directory(dir_.string());
    ASSERT_FALSE(opened.ok()) << "expected an error about: " << problem;
    EXPECT_NE(opened.status().message().find(problem), std::string::npos)
        << opened.status().message();
  }

  fs::path dir_;
};

TEST_F(HfDirectoryTest, MalformedConfig) {
  copy_of("hf_llama");
  write("config.json", "{\"model_type\": \"llama\",");
  expect_error("/config.json: not valid JSON");
}

TEST_F(HfDirectoryTest, MissingOrMistypedConfigKeys) {
  copy_of("hf_llama");
  json config = read("config.json");
  config.erase("hidden_size");
  write("config.json", config.dump());
  expect_error("config.json: required key \"hidden_size\" is missing");
  config["hidden_size"] = "sixteen";
  write("config.json", config.dump());
  expect_error("config.json: \"hidden_size\" must be an integer");
  config["hidden_size"] = 16;
  config["num_key_value_heads"] = 3;
  write("config.json", config.dump());
  expect_error("config.json: model config: num_key_value_heads (3) must divide");
  config["num_key_value_heads"] = 2;
  config["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  write("config.json", config.dump());
  expect_error("rope_scaling type \"dynamic\" is not supported");
}

TEST_F(HfDirectoryTest, MalformedGenerationConfigAndTemplate) {
  copy_of("hf_llama");
  write("generation_config.json", "[]");
  expect_error("generation_config.json: must hold a JSON object");
  write("generation_config.json", R"({"eos_token_id": [2, "x"]})");
  expect_error("\"eos_token_id\" must be an integer or a list of integers");
  write("generation_config.json", R"({"eos_token_id": 999})");
  expect_error("eos_token_id 999 is outside the vocabulary");
  write("generation_config.json", "{}");
  write("tokenizer_config.json", R"({"chat_template": 7})");
  expect_error("tokenizer_config.json: \"chat_template\" must be a string");
}

TEST_F(HfDirectoryTest, NoWeights) {
  copy_of("hf_llama");
  fs::remove(dir_ / "model.safetensors");
  expect_error("no model.safetensors or model.safetensors.index.json");
}

TEST_F(HfDirectoryTest, CorruptSingleFile) {
  copy_of("hf_llama");
  fs::resize_file(dir_ / "model.safetensors", 5000);  // header intact, data cut
  expect_error("model.safetensors: tensor '");
}

TEST_F(HfDirectoryTest, IndexRefersToMissingShard) {
  copy_of("hf_qwen2_sharded");
  fs::remove(dir_ / "model-00002-of-00003.safetensors");
  expect_error(
      "model.safetensors.index.json: refers to shard model-00002-of-00003.safetensors, which is "
      "missing");
}

TEST_F(HfDirectoryTest, IndexNamesTensorAbsentFromShard) {
  copy_of("hf_qwen2_sharded");
  json index = read("model.safetensors.index.json");
  index["weight_map"]["model.norm.weight.extra"] = "model-00001-of-00003.safetensors";
  write("model.safetensors.index.json", index.dump());
  expect_error("tensor 'model.norm.weight.extra' is not in its shard model-00001-of-00003");
}

TEST_F(HfDirectoryTest, IndexMayNotLeaveTheFolder) {
  copy_of("hf_qwen2_sharded");
  json index = read("model.safetensors.index.json");
  index["weight_map"]["model.norm.weight"] = "../model-00001-of-00003.safetensors";
  write("model.safetensors.index.json", index.dump());
  expect_error("tensor 'model.norm.weight' must map to a file name inside the folder");
  write("model.safetensors.index.json", R"({"weight_map": []})");
  expect_error("\"weight_map\" must be an object");
}

TEST_F(HfDirectoryTest, TensorInTwoShards) {
  copy_of("hf_qwen2_sharded");
  fs::copy_file(dir_ / "model-00001-of-00003.safetensors", dir_ / "copy.safetensors");
  json index = read("model.safetensors.index.json");
  std::string first_tensor;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (file == "model-00001-of-00003.safetensors") first_tensor = tensor;
  }
  ASSERT_FALSE(first_tensor.empty());
  index["weight_map"]["copy.only"] = "copy.safetensors";
  write("model.safetensors.index.json", index.dump());
  expect_error("tensor 'copy.only' is not in its shard copy.safetensors");
  index["weight_map"].erase("copy.only");
  index["weight_map"][first_tensor] = "copy.safetensors";
  write("model.safetensors.index.json", index.dump());
  expect_error("is stored in both");
}

TEST(HfConfigTest, DefaultsFollowTransformers) {
  const std::string base = R"("num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 256)";
  auto llama = model_config_from_hf_json(R"({"model_type": "llama", )" + base + "}", "c.json");
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_EQ(llama->num_key_value_heads, 4);
  EXPECT_EQ(llama->head_dim, 16);
  EXPECT_EQ(llama->rope_theta, 10000.0);
  EXPECT_FALSE(llama->tie_word_embeddings);
  EXPECT_FALSE(llama->attention_bias);
  auto qwen = model_config_from_hf_json(
      R"({"model_type": "qwen2", "head_dim": null, )" + base + R"(, "rope_scaling": null})",
      "c.json");
  ASSERT_TRUE(qwen.ok()) << qwen.status().to_string();
  EXPECT_TRUE(qwen->attention_bias);
  EXPECT_EQ(qwen->head_dim, 16);
  auto other = model_config_from_hf_json(R"({"model_type": "gemma", )" + base + "}", "c.json");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->tie_word_embeddings);  // PretrainedConfig's default
  auto linear = model_config_from_hf_json(
      R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 4}, )" + base + "}",
      "c.json");
  ASSERT_TRUE(linear.ok()) << linear.status().to_string();
  EXPECT_EQ(linear->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(linear->rope_scaling.factor, 4.0);
}

}  // namespace
}  // namespace pagoda
