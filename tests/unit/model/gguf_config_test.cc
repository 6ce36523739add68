// ModelConfig from GGUF metadata: defaults, and errors for incomplete or mistyped keys. (The real
// SmolLM2 file is checked against transformers in model_files_test.cc.)
#include "model/gguf_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gguf_bytes.h"

namespace pagoda {
namespace {

using testing::GgufBytes;

// A llama GGUF with the required keys; `extra` appends more entries (counted in `extra_count`)
// and `omit` drops one required key by name.
StatusOr<ModelConfig> config_of(int extra_count = 0,
                                const std::function<void(GgufBytes&)>& extra = {},
                                const std::string& omit = "") {
  GgufBytes kvs;
  int count = extra_count;
  auto add_u32 = [&](const std::string& key, std::uint32_t v) {
    if (key == omit) return;
    kvs.kv_u32(key, v);
    ++count;
  };
  kvs.kv_string("general.architecture", "llama");
  ++count;
  add_u32("llama.block_count", 2);
  add_u32("llama.embedding_length", 64);
  add_u32("llama.feed_forward_length", 128);
  add_u32("llama.attention.head_count", 4);
  add_u32("llama.context_length", 256);
  add_u32("llama.vocab_size", 100);
  if (omit != "llama.attention.layer_norm_rms_epsilon") {
    kvs.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    ++count;
  }
  if (extra) extra(kvs);
  GgufBytes file;
  file.header(3, 0, static_cast<std::uint64_t>(count));
  file.raw(kvs.bytes.data(), kvs.bytes.size());
  auto gguf = GgufFile::parse("cfg.gguf", file.bytes, nullptr);
  if (!gguf.ok()) return gguf.status();
  return model_config_from_gguf(**gguf);
}

TEST(GgufConfigTest, DefaultsForOptionalKeys) {
  auto config = config_of();
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->rope_theta, 10000.0);
  EXPECT_EQ(config->rms_norm_eps, static_cast<double>(1e-5f));
  EXPECT_TRUE(config->tie_word_embeddings);  // no output.weight tensor
  EXPECT_FALSE(config->attention_bias);
  EXPECT_EQ(config->bos_token_id, std::nullopt);
}

TEST(GgufConfigTest, RopeScalingAndTokenIds) {
  auto config = config_of(5, [](GgufBytes& b) {
    b.kv_string("llama.rope.scaling.type", "yarn")
        .kv_f32("llama.rope.scaling.factor", 4.0f)
        .kv_u32("llama.rope.scaling.original_context_length", 64)
        .kv_u32("tokenizer.ggml.eos_token_id", 2)
        .kv_u32("tokenizer.ggml.eot_token_id", 3);
  });
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(config->rope_scaling.factor, 4.0);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(config->eos_token_ids, (std::vector<std::int64_t>{2, 3}));
}

void expect_error(const StatusOr<ModelConfig>& config, const std::string& problem) {
  ASSERT_FALSE(config.ok()) << "expected an error about: " << problem;
  EXPECT_EQ(config.status().message().rfind("cfg.gguf: ", 0), 0u) << config.status().message();
  EXPECT_NE(config.status().message().find(problem), std::string::npos)
      << config.status().message();
}

TEST(GgufConfigTest, MissingAndMistypedKeys) {
  expect_error(config_of(0, {}, "llama.block_count"), "metadata key llama.block_count is missing");
  expect_error(config_of(0, {}, "llama.attention.layer_norm_rms_epsilon"),
               "llama.attention.layer_norm_rms_epsilon is missing");
  expect_error(config_of(1, [](GgufBytes& b) { b.kv_string("llama.rope.freq_base", "big"); }),
               "llama.rope.freq_base must be a number, not STRING");
  expect_error(
      config_of(1,
                [](GgufBytes& b) {
                  b.str("llama.attention.head_count_kv").u32(9).u32(4).u64(2).u32(1).u32(1);
                }),
      "per-layer array");
  expect_error(config_of(1, [](GgufBytes& b) { b.kv_u32("llama.rope.dimension_count", 8); }),
               "partial rotary embeddings are not supported");
  expect_error(config_of(1, [](GgufBytes& b) { b.kv_string("llama.rope.scaling.type", "su"); }),
               "RoPE scaling type 'su' is not supported");
  expect_error(config_of(1, [](GgufBytes& b) { b.kv_u32("llama.attention.head_count_kv", 3); }),
               "num_key_value_heads (3) must divide num_attention_heads (4)");
  expect_error(config_of(1, [](GgufBytes& b) { b.kv_u32("tokenizer.ggml.bos_token_id", 100); }),
               "bos_token_id 100 is outside the vocabulary");
}

TEST(ModelConfigTest, ValidateNamesTheField) {
  ModelConfig c;
  EXPECT_EQ(c.validate().message(), "model config: architecture is empty");
  c.architecture = "llama";
  c.num_hidden_layers = 1;
  c.hidden_size = 8;
  c.intermediate_size = 8;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 10;
  c.max_position_embeddings = 0;
  EXPECT_EQ(c.validate().message(),
            "model config: max_position_embeddings must be positive, got 0");
  c.max_position_embeddings = 16;
  EXPECT_TRUE(c.validate().ok());
  c.head_dim = 3;
  EXPECT_EQ(c.validate().message(),
            "model config: head_dim must be even for rotary embeddings, got 3");
  c.head_dim = 4;
  c.rope_scaling.type = RopeScalingType::kLlama3;
  c.rope_scaling.factor = 8;
  EXPECT_NE(c.validate().message().find("rope_scaling of type llama3 needs"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
