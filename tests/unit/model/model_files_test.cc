// open_model_files() on the real GGUF and on Hugging Face folders, checked against the configs
// and tensors `transformers` and `safetensors` read from the same files
// (tests/golden/model/make_hf_golden.py), plus the `inspect` summary.
#include "model/model_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/inspect.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/model/";
const std::string kModel =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

json load_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

RopeScalingType rope_type(const std::string& name) {
  if (name == "default") return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "llama3") return RopeScalingType::kLlama3;
  if (name == "yarn") return RopeScalingType::kYarn;
  ADD_FAILURE() << "unknown rope type " << name;
  return RopeScalingType::kNone;
}

// `golden` is config_json() of the script; `generation_eos` the generation config's eos ids.
void expect_config_matches(const ModelConfig& c, const json& golden,
                           const std::vector<std::int64_t>& generation_eos) {
  EXPECT_EQ(c.architecture, golden["architecture"].get<std::string>());
  EXPECT_EQ(c.num_hidden_layers, golden["num_hidden_layers"].get<std::int64_t>());
  EXPECT_EQ(c.hidden_size, golden["hidden_size"].get<std::int64_t>());
  EXPECT_EQ(c.intermediate_size, golden["intermediate_size"].get<std::int64_t>());
  EXPECT_EQ(c.num_attention_heads, golden["num_attention_heads"].get<std::int64_t>());
  EXPECT_EQ(c.num_key_value_heads, golden["num_key_value_heads"].get<std::int64_t>());
  EXPECT_EQ(c.head_dim, golden["head_dim"].get<std::int64_t>());
  EXPECT_EQ(c.vocab_size, golden["vocab_size"].get<std::int64_t>());
  EXPECT_EQ(c.max_position_embeddings, golden["max_position_embeddings"].get<std::int64_t>());
  EXPECT_EQ(c.rms_norm_eps, golden["rms_norm_eps"].get<double>());
  EXPECT_EQ(c.rope_theta, golden["rope_theta"].get<double>());
  EXPECT_EQ(c.rope_scaling.type, rope_type(golden["rope_type"]));
  if (!golden["rope_factor"].is_null()) {
    EXPECT_EQ(c.rope_scaling.factor, golden["rope_factor"].get<double>());
    EXPECT_EQ(c.rope_scaling.low_freq_factor, golden["rope_low_freq_factor"].get<double>());
    EXPECT_EQ(c.rope_scaling.high_freq_factor, golden["rope_high_freq_factor"].get<double>());
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings,
              golden["rope_original_max_position_embeddings"].get<std::int64_t>());
  }
  EXPECT_EQ(c.tie_word_embeddings, golden["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(c.attention_bias, golden["attention_bias"].get<bool>());
  EXPECT_EQ(c.bos_token_id, golden["bos_token_id"].get<std::int64_t>());
  std::vector<std::int64_t> eos = golden["eos_token_ids"];
  for (std::int64_t id : generation_eos) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  EXPECT_EQ(c.eos_token_ids, eos);
  EXPECT_EQ(c.torch_dtype, golden["dtype"].is_null() ? "" : golden["dtype"].get<std::string>());
}

TEST(ModelFilesTest, SmolLm2GgufConfigMatchesTransformers) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " absent; run scripts/setup.sh";
  auto files = open_model_files(kModel);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  EXPECT_EQ(files->format, ModelFormat::kGguf);
  expect_config_matches(files->config, load_json(kDataDir + "smollm2_config.json")["config"], {});
  EXPECT_EQ(files->config.rope_theta, 100000.0);
  ASSERT_TRUE(files->chat_template.has_value());
  EXPECT_NE(files->chat_template->find("<|im_start|>"), std::string::npos);
  // Shapes are outermost first: the embedding is [vocab, hidden].
  const ModelTensor* embedding = files->find_tensor("token_embd.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->dtype, DType::kQ8_0);
  EXPECT_EQ(embedding->shape, (std::vector<std::uint64_t>{49152, 576}));
  EXPECT_EQ(embedding->data.size(), 49152u * 576 / 32 * 34);
  EXPECT_EQ(files->tensors.size(), 272u);
}

class HfFolderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFolderTest, MatchesTransformersAndSafetensors) {
  const json golden = load_json(kDataDir + "hf_golden.json")["folders"][GetParam()];
  auto files = open_model_files(kDataDir + GetParam());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  EXPECT_EQ(files->format, ModelFormat::kHuggingFace);
  const json& generation = golden["generation"];
  const std::vector<std::int64_t> generation_eos =
      generation.contains("eos_token_ids") ? generation["eos_token_ids"] : json::array();
  expect_config_matches(files->config, golden["config"], generation_eos);
  for (const char* key : {"temperature", "top_p"}) {
    const std::optional<double>& got =
        std::string(key) == "temperature" ? files->generation.temperature : files->generation.top_p;
    if (generation.contains(key) && !generation[key].is_null()) {
      EXPECT_EQ(got, generation[key].get<double>()) << key;
    } else {
      EXPECT_EQ(got, std::nullopt) << key;
    }
  }
  std::size_t checked = 0;
  for (const json& g : golden["tensors"]) {
    if (g["file"] == "extra.safetensors") continue;
    const std::string name = g["name"];
    SCOPED_TRACE(name);
    const ModelTensor* t = files->find_tensor(name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(g["dtype"], "float32");
    EXPECT_EQ(t->dtype, DType::kF32);
    EXPECT_EQ(t->shape, g["shape"].get<std::vector<std::uint64_t>>());
    std::vector<float> values(t->num_elements());
    ASSERT_EQ(t->data.size(), values.size() * sizeof(float));
    std::memcpy(values.data(), t->data.data(), t->data.size());
    EXPECT_EQ(values, g["values"].get<std::vector<float>>());
    ++checked;
  }
  EXPECT_EQ(files->tensors.size(), checked);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfFolderTest,
                         ::testing::Values("hf_llama", "hf_qwen2_sharded", "hf_llama3_v4"));

TEST(ModelFilesTest, HfFolderFiles) {
  auto llama = open_model_files(kDataDir + "hf_llama");
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_EQ(llama->chat_template, "{{ messages[0]['content'] }}");  // the "default" entry
  EXPECT_EQ(llama->tokenizer_json_path, kDataDir + "hf_llama/tokenizer.json");
  EXPECT_EQ(llama->tokenizer_config_path, kDataDir + "hf_llama/tokenizer_config.json");
  EXPECT_EQ(llama->generation.top_k, 20);
  EXPECT_EQ(llama->generation.do_sample, true);
  auto qwen = open_model_files(kDataDir + "hf_qwen2_sharded");
  ASSERT_TRUE(qwen.ok()) << qwen.status().to_string();
  EXPECT_EQ(qwen->safetensors.size(), 3u);
  ASSERT_TRUE(qwen->chat_template.has_value());
  EXPECT_EQ(qwen->chat_template->rfind("{% for m in messages %}", 0), 0u);
  EXPECT_TRUE(qwen->tokenizer_json_path.empty());
}

TEST(ModelFilesTest, PathThatIsNeitherIsAnError) {
  auto missing = open_model_files(kDataDir + "no_such_model");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto folder = open_model_files(kDataDir);
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().message(),
            "path " + kDataDir + " is neither a .gguf file nor a folder with config.json");
  auto json_file = open_model_files(kDataDir + "hf_golden.json");
  ASSERT_FALSE(json_file.ok());
  EXPECT_NE(json_file.status().message().find("not a GGUF file"), std::string::npos);
}

TEST(InspectTest, SmolLm2Summary) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " absent; run scripts/setup.sh";
  auto files = open_model_files(kModel);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::ostringstream out;
  ASSERT_TRUE(write_model_summary(*files, out).ok());
  const std::string summary = out.str();
  for (const char* line : {
           "format:             GGUF v3\n",
           "architecture:       llama\n",
           "layers:             30\n",
           "hidden size:        576\n",
           "attention heads:    9 (kv heads 3, head dim 64)\n",
           "vocab size:         49152\n",
           "context length:     8192\n",
           "rope theta:         100000 (scaling none)\n",
           "tied embeddings:    yes\n",
           "bos / eos ids:      1 / [2]\n",
           "tokenizer:          gpt2 (pre-tokenizer smollm)\n",
           "chat template:      yes (",
           "tensors:            272 (134515008 parameters, ",
           "  token_embd.weight",
       }) {
    EXPECT_NE(summary.find(line), std::string::npos) << line << "\nin:\n" << summary;
  }
  EXPECT_NE(summary.find("Q8_0     [49152, 576]\n"), std::string::npos) << summary;
}

TEST(InspectTest, HfSummaryNamesTokenizerJsonKinds) {
  auto files = open_model_files(kDataDir + "hf_llama");
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::ostringstream out;
  ASSERT_TRUE(write_model_summary(*files, out).ok());
  EXPECT_NE(out.str().find("tokenizer:          BPE (pre-tokenizer Sequence[Split, ByteLevel])"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("format:             Hugging Face safetensors (1 file)"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda
