// Weight lookup: GGUF names map to HF names, and a checkpoint that does not match its config is a
// clear Status naming the tensor, never a crash.
#include "models/weights.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/cpu_model_executor.h"
#include "models/weight_names.h"

namespace pagoda::models {
namespace {

namespace fs = std::filesystem;
const fs::path kTinyLlama = fs::path(PAGODA_TEST_DATA_DIR) / "forward" / "tiny_llama";

TEST(WeightNamesTest, MapsGgufNamesToHf) {
  EXPECT_EQ(hf_name_from_gguf("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(hf_name_from_gguf("output.weight"), "lm_head.weight");
  EXPECT_EQ(hf_name_from_gguf("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.3.attn_q.weight"), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.12.attn_k.bias"), "model.layers.12.self_attn.k_proj.bias");
  EXPECT_EQ(hf_name_from_gguf("blk.0.attn_output.weight"),
            "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.0.attn_norm.weight"), "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.29.ffn_norm.weight"),
            "model.layers.29.post_attention_layernorm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.1.ffn_down.weight"), "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.x.ffn_up.weight"), std::nullopt);
  EXPECT_EQ(hf_name_from_gguf("blk..ffn_up.weight"), std::nullopt);
  EXPECT_EQ(hf_name_from_gguf("blk.1.ffn_up.scales"), std::nullopt);
}

// A copy of tiny_llama whose config.json is edited, so config and tensors disagree.
class BadCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pagoda_bad_ckpt_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
      fs::copy_file(kTinyLlama / name, dir_ / name);
    }
    std::ifstream in(dir_ / "config.json");
    config_ = nlohmann::json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status load() {
    std::ofstream(dir_ / "config.json") << config_.dump();
    auto files = open_model_files(dir_.string());
    if (!files.ok()) return files.status();
    auto executor =
        CpuModelExecutor::create(std::make_shared<const ModelFiles>(std::move(*files)), {});
    return executor.status();
  }

  fs::path dir_;
  nlohmann::json config_;
};

TEST_F(BadCheckpointTest, WrongShapeNamesTensorAndBothShapes) {
  config_["intermediate_size"] = 100;
  const Status s = load();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.layers.0.mlp.gate_proj.weight: expected shape [100, 64], "
                             "file has [128, 64]"),
            std::string::npos)
      << s.message();
}

TEST_F(BadCheckpointTest, MissingLayerIsNamed) {
  config_["num_hidden_layers"] = 4;
  const Status s = load();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing tensor model.layers.3.input_layernorm.weight"),
            std::string::npos)
      << s.message();
}

TEST_F(BadCheckpointTest, UntiedHeadWithoutLmHeadIsAnError) {
  config_["tie_word_embeddings"] = false;
  const Status s = load();
  EXPECT_NE(s.message().find("missing tensor lm_head.weight"), std::string::npos) << s.message();
}

TEST_F(BadCheckpointTest, UnknownArchitectureIsUnimplemented) {
  config_["model_type"] = "gpt2";
  EXPECT_FALSE(load().ok());
}

TEST(WeightsTest, PrefixBuilderFindsTensorsByHfName) {
  auto files = open_model_files(kTinyLlama.string());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const Weights w = Weights::index(*files);
  const Weights attn = w.pp("model").pp("layers").pp("2").pp("self_attn");
  EXPECT_EQ(attn.full_name("q_proj.weight"), "model.layers.2.self_attn.q_proj.weight");
  auto q = attn.get("q_proj.weight", {64, 64});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ((*q)->name, "model.layers.2.self_attn.q_proj.weight");
  auto bias = attn.get_optional("q_proj.bias", {64});
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(*bias, nullptr);
  auto norm = w.pp("model").get_f32("norm.weight", {64});
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->size(), 64u);
}

}  // namespace
}  // namespace pagoda::models
