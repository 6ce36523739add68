// The architecture registry: the one allowlist, and what each entry tells the loaders.
#include "models/architecture.h"

#include <gtest/gtest.h>

#include "model/architecture_config.h"
#include "models/gemma3.h"
#include "models/llama.h"
#include "models/llama_weights.h"
#include "models/qwen3.h"

namespace pagoda::models {
namespace {

TEST(ArchitectureRegistry, EachNameHasItsLayerLoopAndRopeStyle) {
  const Architecture* llama = find_architecture("llama");
  const Architecture* mistral = find_architecture("mistral");
  const Architecture* qwen2 = find_architecture("qwen2");
  const Architecture* qwen3 = find_architecture("qwen3");
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(mistral, nullptr);
  ASSERT_NE(qwen2, nullptr);
  ASSERT_NE(qwen3, nullptr);
  EXPECT_EQ(llama->forward, &llama_forward);
  EXPECT_EQ(mistral->forward, &llama_forward);
  EXPECT_EQ(qwen2->forward, &llama_forward);
  EXPECT_EQ(qwen3->forward, &qwen3_forward);
  // llama.cpp permutes Q/K rows only for llama and mistral.
  EXPECT_EQ(llama->gguf_rope, GgufRope::kAdjacentPairs);
  EXPECT_EQ(mistral->gguf_rope, GgufRope::kAdjacentPairs);
  EXPECT_EQ(qwen2->gguf_rope, GgufRope::kRotateHalf);
  EXPECT_EQ(qwen3->gguf_rope, GgufRope::kRotateHalf);
  EXPECT_FALSE(llama->qk_norm);
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_EQ(find_architecture("gpt2"), nullptr);
  EXPECT_EQ(supported_architecture_names(), "llama, mistral, qwen2, qwen3, gemma3, gemma3_text");
}

// Gemma 3: GGUF files say gemma3, config.json gemma3_text; one layer loop, rotate-half RoPE in
// GGUF, q/k norms, sandwich norms, and the 1 of its (1 + weight) norms added to HF files only.
TEST(ArchitectureRegistry, Gemma3UnderBothNames) {
  for (const char* name : {"gemma3", "gemma3_text"}) {
    const Architecture* gemma = find_architecture(name);
    ASSERT_NE(gemma, nullptr) << name;
    EXPECT_EQ(gemma->forward, &gemma3_forward);
    EXPECT_EQ(gemma->gguf_rope, GgufRope::kRotateHalf);
    EXPECT_TRUE(gemma->qk_norm);
    EXPECT_TRUE(gemma->sandwich_norms);
    EXPECT_EQ(gemma->hf_norm_weight_offset, 1.0f);
  }
  EXPECT_FALSE(find_architecture("qwen3")->sandwich_norms);
  EXPECT_EQ(find_architecture("llama")->hf_norm_weight_offset, 0.0f);
}

// The registry's config half (src/model/architecture_config.cc, below the loaders) names the
// same architectures: adding one to either list and not the other fails here.
TEST(ArchitectureRegistry, EveryEntryHasItsConfigHalfAndNoOther) {
  std::string config_names;
  for (const ArchitectureConfig& c : architecture_configs()) {
    if (!config_names.empty()) config_names += ", ";
    config_names += c.name;
    EXPECT_NE(find_architecture(c.name), nullptr) << c.name;
  }
  EXPECT_EQ(config_names, supported_architecture_names());
  // The entries that need interleaved-attention keys are the ones whose loop applies windows.
  for (const ArchitectureConfig& c : architecture_configs()) {
    EXPECT_EQ(c.interleaved_attention.has_value(), find_architecture(c.name)->sliding_window_layers)
        << c.name;
  }
}

TEST(ArchitectureRegistry, AnUnknownArchitectureIsRefusedEverywhereWithTheList) {
  ModelConfig c;
  c.architecture = "phi3";
  c.num_hidden_layers = 1;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.head_dim = 16;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  ASSERT_TRUE(c.validate().ok()) << c.validate().to_string();
  const auto found = architecture_of(c);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(found.status().message().find("\"phi3\""), std::string::npos);
  EXPECT_NE(found.status().message().find("llama, mistral, qwen2, qwen3"), std::string::npos);
  const auto dummy = dummy_llama_weights(c, 1);
  ASSERT_FALSE(dummy.ok());
  EXPECT_EQ(dummy.status().code(), StatusCode::kUnimplemented);
}

TEST(ArchitectureRegistry, Qwen3DummyWeightsCarryPerHeadNorms) {
  ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = 2;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 48;  // not hidden / heads, as Qwen3 allows
  c.vocab_size = 40;
  c.max_position_embeddings = 64;
  const auto w = dummy_llama_weights(c, 3);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (const LlamaLayerWeights& layer : w->layers) {
    EXPECT_EQ(layer.q_norm.size(), 48u);
    EXPECT_EQ(layer.k_norm.size(), 48u);
    EXPECT_EQ(layer.q_proj.num_rows, 2 * 48);
  }
  c.architecture = "llama";
  const auto llama = dummy_llama_weights(c, 3);
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_TRUE(llama->layers[0].q_norm.empty());
}

}  // namespace
}  // namespace pagoda::models
