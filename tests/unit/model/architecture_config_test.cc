// The registry's config half: each architecture's defaults reach ModelConfig when config.json
// leaves the key out. The expected values are those of transformers 5.23's config classes
// (LlamaConfig(), Qwen2Config(), Qwen3Config(), Gemma3TextConfig() printed in the dev venv), so
// losing an entry's default fails here.
#include "model/architecture_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/hf_config.h"

namespace pagoda {
namespace {

// The keys every reader requires, and nothing an architecture has a default for.
const std::string kShape = R"("num_hidden_layers": 12, "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100,
    "max_position_embeddings": 256)";

StatusOr<ModelConfig> read(const std::string& model_type, const std::string& extra = "") {
  return model_config_from_hf_json(
      R"({"model_type": ")" + model_type + R"(", )" + kShape + extra + "}", "config.json");
}

TEST(ArchitectureConfigTest, Qwen2HasQkvBiasesWhateverTheConfigSays) {
  for (const std::string extra : {"", R"(, "attention_bias": false)"}) {
    auto c = read("qwen2", extra);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->attention_bias) << extra;  // Qwen2Attention: nn.Linear(..., bias=True)
    EXPECT_FALSE(c->tie_word_embeddings);     // Qwen2Config.tie_word_embeddings = False
  }
  auto llama = read("llama");
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_FALSE(llama->attention_bias);
  auto biased = read("llama", R"(, "attention_bias": true)");
  ASSERT_TRUE(biased.ok()) << biased.status().to_string();
  EXPECT_TRUE(biased->attention_bias);
}

TEST(ArchitectureConfigTest, LlamaMistralAndQwenUntieTheEmbeddingsByDefault) {
  for (const char* name : {"llama", "mistral", "qwen2", "qwen3"}) {
    auto c = read(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
    EXPECT_FALSE(c->tie_word_embeddings) << name;
  }
  auto tied = read("qwen3", R"(, "tie_word_embeddings": true)");
  ASSERT_TRUE(tied.ok()) << tied.status().to_string();
  EXPECT_TRUE(tied->tie_word_embeddings);
}

TEST(ArchitectureConfigTest, Qwen3HeadDimIs128UnlessTheConfigSays) {
  auto c = read("qwen3");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, 128);  // Qwen3Config.head_dim = 128, not hidden / heads (16)
  auto llama = read("llama");
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_EQ(llama->head_dim, 16);  // LlamaConfig: hidden_size // num_attention_heads
  auto set = read("qwen3", R"(, "head_dim": 32)");
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->head_dim, 32);
}

// A Gemma 3 config.json with none of its own keys: Gemma3TextConfig's values, under both names.
TEST(ArchitectureConfigTest, Gemma3TakesGemma3TextConfigsDefaults) {
  for (const char* name : {"gemma3_text", "gemma3"}) {
    auto c = read(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
    EXPECT_EQ(c->sliding_window, 4096) << name;
    EXPECT_EQ(c->query_pre_attn_scalar, 256.0) << name;
    EXPECT_EQ(c->head_dim, 256) << name;
    EXPECT_EQ(c->rope_theta, 1e6) << name;        // default_theta["global"]
    EXPECT_EQ(c->rope_local_theta, 1e4) << name;  // default_theta["local"]
    EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone) << name;
    EXPECT_TRUE(c->tie_word_embeddings) << name;
    EXPECT_FALSE(c->attention_bias) << name;
    EXPECT_EQ(c->rms_norm_eps, 1e-6) << name;
    EXPECT_FALSE(c->attn_logit_softcapping) << name;
    // sliding_window_pattern 6: layers 5 and 11 full.
    std::vector<AttentionType> expected(12, AttentionType::kSliding);
    expected[5] = expected[11] = AttentionType::kFull;
    EXPECT_EQ(c->layer_types, expected) << name;
  }
  // transformers 5's per-layer-type rope_parameters without bases take the same defaults.
  auto per_type = read("gemma3_text", R"(, "rope_parameters": {
      "full_attention": {"rope_type": "default"},
      "sliding_attention": {"rope_type": "default"}})");
  ASSERT_TRUE(per_type.ok()) << per_type.status().to_string();
  EXPECT_EQ(per_type->rope_theta, 1e6);
  EXPECT_EQ(per_type->rope_local_theta, 1e4);
}

// Architectures without interleaved attention never read its keys, whatever the file holds
// (Qwen2 configs carry a sliding_window that only use_sliding_window, false in every released
// checkpoint, would apply).
TEST(ArchitectureConfigTest, OnlyInterleavedArchitecturesReadLayerTypes) {
  auto c = read("qwen2", R"(, "sliding_window": 4096,
      "layer_types": ["sliding_attention", "full_attention"])");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->layer_types.empty());
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->query_pre_attn_scalar);
}

// MistralConfig: sliding_window slides every layer; absent it is the class's 4096 (Mistral 7B
// v0.1), null (v0.2 on) is full attention; Mistral never reads layer_types.
TEST(ArchitectureConfigTest, MistralsSlidingWindowSlidesEveryLayer) {
  auto absent = read("mistral");
  ASSERT_TRUE(absent.ok()) << absent.status().to_string();
  EXPECT_EQ(absent->sliding_window, 4096);  // MistralConfig().sliding_window
  EXPECT_EQ(absent->layer_types, std::vector<AttentionType>(12, AttentionType::kSliding));
  auto set = read("mistral", R"(, "sliding_window": 12,
      "layer_types": ["sliding_attention", "full_attention"])");
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->sliding_window, 12);
  EXPECT_EQ(set->layer_types, std::vector<AttentionType>(12, AttentionType::kSliding));
  auto none = read("mistral", R"(, "sliding_window": null)");
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->sliding_window, 0);
  EXPECT_TRUE(none->layer_types.empty());
  EXPECT_FALSE(read("mistral", R"(, "sliding_window": "wide")").ok());
}

// A model_type outside the registry is still read, with PretrainedConfig's defaults; loading
// it is refused later (models::architecture_of).
TEST(ArchitectureConfigTest, AnUnregisteredNameGetsPretrainedConfigsDefaults) {
  EXPECT_EQ(find_architecture_config("phi3"), nullptr);
  EXPECT_EQ(architecture_config("phi3").name, "");
  auto c = read("phi3");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->rope_theta, 10000.0);
}

// A config.json missing a required key is answered with the registry's names.
TEST(ArchitectureConfigTest, AMissingKeyNamesTheRegisteredArchitectures) {
  auto c = model_config_from_hf_json(R"({"model_type": "qwen3"})", "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "config.json: required key \"num_hidden_layers\" is missing; is this a checkpoint of a "
            "decoder Pagoda runs (llama, mistral, qwen2, qwen3, gemma3, gemma3_text)?");
}

}  // namespace
}  // namespace pagoda
