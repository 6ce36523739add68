// Gemma 3's ModelConfig from GGUF metadata: the interleaved sliding-window attention that its GGUF
// states only in part (window size) and llama.cpp completes by architecture, on synthetic files,
// and the real Gemma 3 270M against the config transformers built from the same file
// (tests/data/forward/gemma3_greedy.json, checked there against google/gemma-3-270m's config.json).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "gguf_bytes.h"
#include "model/gguf_config.h"
#include "model/hf_config.h"
#include "model/inspect.h"
#include "model/model_files.h"

namespace pagoda {
namespace {

using testing::GgufBytes;

// A gemma3 GGUF with Gemma 3 1B-like keys for `layers` layers; `extra` appends entries.
StatusOr<ModelConfig> gemma3_config(std::uint32_t layers, int extra_count = 0,
                                    const std::function<void(GgufBytes&)>& extra = {},
                                    bool with_window = true) {
  GgufBytes kvs;
  kvs.kv_string("general.architecture", "gemma3")
      .kv_u32("gemma3.block_count", layers)
      .kv_u32("gemma3.embedding_length", 1152)
      .kv_u32("gemma3.feed_forward_length", 6912)
      .kv_u32("gemma3.attention.head_count", 4)
      .kv_u32("gemma3.attention.head_count_kv", 1)
      .kv_u32("gemma3.attention.key_length", 256)
      .kv_u32("gemma3.context_length", 32768)
      .kv_u32("gemma3.vocab_size", 262144)
      .kv_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_f32("gemma3.rope.freq_base", 1e6f);
  int count = 11 + extra_count;
  if (with_window) {
    kvs.kv_u32("gemma3.attention.sliding_window", 512);
    ++count;
  }
  if (extra) extra(kvs);
  GgufBytes file;
  file.header(3, 0, static_cast<std::uint64_t>(count));
  file.raw(kvs.bytes.data(), kvs.bytes.size());
  auto gguf = GgufFile::parse("gemma.gguf", file.bytes, nullptr);
  if (!gguf.ok()) return gguf.status();
  return model_config_from_gguf(**gguf);
}

std::vector<AttentionType> every_nth_full(std::size_t layers, std::size_t n) {
  std::vector<AttentionType> out;
  for (std::size_t i = 0; i < layers; ++i) {
    out.push_back((i + 1) % n == 0 ? AttentionType::kFull : AttentionType::kSliding);
  }
  return out;
}

TEST(Gemma3ConfigTest, CompletesWhatTheGgufLeavesOutAsLlamaCppDoes) {
  auto config = gemma3_config(26);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->sliding_window, 512);
  EXPECT_EQ(config->layer_types, every_nth_full(26, 6));
  EXPECT_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->rope_local_theta, 10000.0);
  EXPECT_EQ(config->query_pre_attn_scalar, 256.0);  // head_dim
  EXPECT_EQ(config->head_dim, 256);
}

TEST(Gemma3ConfigTest, ReadsThePatternAndLocalBaseWhereTheFileHasThem) {
  auto config = gemma3_config(8, 2, [](GgufBytes& b) {
    b.kv_u32("gemma3.attention.sliding_window_pattern", 4)
        .kv_f32("gemma3.rope.freq_base_swa", 20000.0f);
  });
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->layer_types, every_nth_full(8, 4));
  EXPECT_EQ(config->rope_local_theta, 20000.0);
}

// Gemma's chat turns end with <end_of_turn>: a gemma3 file whose vocabulary has it stops there as
// on <eos>, as the instruction-tuned checkpoints' generation_config.json says (eos [1, 106]).
TEST(Gemma3ConfigTest, EndOfTurnStopsLikeEos) {
  const auto with_tokens = [](std::vector<std::string_view> tokens) {
    return gemma3_config(8, 2, [tokens](GgufBytes& b) {
      b.kv_u32("tokenizer.ggml.eos_token_id", 1);
      b.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(tokens.size());
      for (std::string_view t : tokens) b.str(t);
    });
  };
  auto config = with_tokens({"<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->eos_token_ids, (std::vector<std::int64_t>{1, 4}));
  auto without = with_tokens({"<pad>", "<eos>", "<bos>"});
  ASSERT_TRUE(without.ok()) << without.status().to_string();
  EXPECT_EQ(without->eos_token_ids, std::vector<std::int64_t>{1});
}

// config.json as transformers 5 writes it (layer_types, rope_parameters per layer type) and as
// 4.x did (sliding_window_pattern, rope_theta + rope_scaling for the full layers,
// rope_local_base_freq); absent keys take Gemma3TextConfig's defaults.
constexpr std::string_view kGemma3Base = R"("num_hidden_layers": 6, "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 256, "vocab_size": 300, "max_position_embeddings": 512)";

TEST(Gemma3ConfigTest, ReadsTransformers5ConfigJson) {
  const std::string json = R"({"model_type": "gemma3_text", )" + std::string(kGemma3Base) +
                           R"(, "sliding_window": 12, "query_pre_attn_scalar": 64,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                      "sliding_attention", "full_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0,
                                             "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}},
      "attn_logit_softcapping": 30.0})";
  auto c = model_config_from_hf_json(json, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 12);
  EXPECT_EQ(c->query_pre_attn_scalar, 64.0);
  using enum AttentionType;
  EXPECT_EQ(c->layer_types,
            (std::vector<AttentionType>{kSliding, kFull, kSliding, kSliding, kFull, kFull}));
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->rope_local_theta, 20000.0);
  EXPECT_EQ(c->attn_logit_softcapping, 30.0);
  EXPECT_TRUE(c->tie_word_embeddings);
}

TEST(Gemma3ConfigTest, ReadsTransformers4ConfigJsonWithDefaults) {
  const std::string json = R"({"model_type": "gemma3_text", )" + std::string(kGemma3Base) +
                           R"(, "sliding_window_pattern": 3, "rope_theta": 1000000.0,
      "rope_local_base_freq": 10000.0})";
  auto c = model_config_from_hf_json(json, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layer_types, every_nth_full(6, 3));
  EXPECT_EQ(c->sliding_window, 4096);          // Gemma3TextConfig's default
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);  // likewise
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 10000.0);
  EXPECT_FALSE(c->attn_logit_softcapping);
}

TEST(Gemma3ConfigTest, RefusesFinalSoftcapAndUnknownLayerTypes) {
  auto capped =
      model_config_from_hf_json(R"({"model_type": "gemma3_text", )" + std::string(kGemma3Base) +
                                    R"(, "final_logit_softcapping": 30.0})",
                                "config.json");
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), StatusCode::kUnimplemented);
  auto odd = model_config_from_hf_json(
      R"({"model_type": "gemma3_text", )" + std::string(kGemma3Base) +
          R"(, "layer_types": ["chunked_attention", "full_attention", "full_attention",
             "full_attention", "full_attention", "full_attention"]})",
      "config.json");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("chunked_attention"), std::string::npos);
}

TEST(Gemma3ConfigTest, The27BScalesScoresByHiddenOverHeads) {
  // llama.cpp tells the 27B by its 62 layers: query_pre_attn_scalar = hidden / heads there.
  auto config = gemma3_config(62);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->query_pre_attn_scalar, 1152.0 / 4);
}

TEST(Gemma3ConfigTest, MissingWindowAndBadPatternAreErrors) {
  auto missing = gemma3_config(6, 0, {}, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("gemma3.attention.sliding_window is missing"),
            std::string::npos)
      << missing.status().message();
  auto zero = gemma3_config(
      6, 1, [](GgufBytes& b) { b.kv_u32("gemma3.attention.sliding_window_pattern", 0); });
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("sliding_window_pattern must be positive"),
            std::string::npos)
      << zero.status().message();
}

TEST(Gemma3ConfigTest, ValidateChecksTheLayerTypes) {
  auto config = gemma3_config(6);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  ModelConfig c = *config;
  c.layer_types.pop_back();
  EXPECT_EQ(c.validate().message(), "model config: layer_types has 5 entries for 6 layers");
  c = *config;
  c.sliding_window = 0;
  EXPECT_EQ(c.validate().message(),
            "model config: sliding_window must be positive when a layer slides, got 0");
}

TEST(Gemma3ConfigTest, RealGemma3270MMatchesTransformers) {
  const std::string path =
      std::string(PAGODA_SOURCE_DIR) + "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string_view(ci) == "true") {
      FAIL() << path << " is missing although CI=true; scripts/setup.sh fetches it";
    }
    GTEST_SKIP() << path << " is missing; run scripts/setup.sh";
  }
  std::ifstream golden(std::string(PAGODA_TEST_DATA_DIR) + "/forward/gemma3_greedy.json");
  ASSERT_TRUE(golden.good());
  const nlohmann::json want = nlohmann::json::parse(golden)["model"]["config"];
  auto files = open_model_files(path);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const ModelConfig& c = files->config;
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.hidden_size, want["hidden_size"].get<std::int64_t>());
  EXPECT_EQ(c.num_hidden_layers, want["num_hidden_layers"].get<std::int64_t>());
  EXPECT_EQ(c.num_attention_heads, want["num_attention_heads"].get<std::int64_t>());
  EXPECT_EQ(c.num_key_value_heads, want["num_key_value_heads"].get<std::int64_t>());
  EXPECT_EQ(c.head_dim, want["head_dim"].get<std::int64_t>());
  EXPECT_EQ(c.intermediate_size, want["intermediate_size"].get<std::int64_t>());
  EXPECT_EQ(c.vocab_size, want["vocab_size"].get<std::int64_t>());
  EXPECT_EQ(c.max_position_embeddings, want["max_position_embeddings"].get<std::int64_t>());
  EXPECT_EQ(c.sliding_window, want["sliding_window"].get<std::int64_t>());
  EXPECT_EQ(c.query_pre_attn_scalar, want["query_pre_attn_scalar"].get<double>());
  EXPECT_NEAR(c.rms_norm_eps, want["rms_norm_eps"].get<double>(), 1e-12);
  EXPECT_EQ(c.rope_theta, want["rope_theta"]["full_attention"].get<double>());
  EXPECT_EQ(c.rope_local_theta, want["rope_theta"]["sliding_attention"].get<double>());
  EXPECT_EQ(c.tie_word_embeddings, want["tie_word_embeddings"].get<bool>());
  ASSERT_EQ(c.layer_types.size(), want["layer_types"].size());
  for (std::size_t i = 0; i < c.layer_types.size(); ++i) {
    const bool full = want["layer_types"][i] == "full_attention";
    EXPECT_EQ(c.layer_types[i], full ? AttentionType::kFull : AttentionType::kSliding)
        << "layer " << i;
  }
  EXPECT_EQ(c.bos_token_id, 2);
  // <eos> from the file, then <end_of_turn> (gemma_end_of_turn_id in gguf_config.cc).
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{1, 106}));

  // `pagoda inspect` says the same.
  std::ostringstream out;
  ASSERT_TRUE(write_model_summary(*files, out).ok());
  for (const char* line : {
           "architecture:       gemma3\n",
           "attention heads:    4 (kv heads 1, head dim 256)\n",
           "rope theta:         1000000 (scaling none)\n",
           "sliding window:     512 (full layers 5,11,17; local rope theta 10000)\n",
           "query scale:        256^-1/2\n",
           "tokenizer:          llama (pre-tokenizer default)\n",
           "chat template:      no\n",
       }) {
    EXPECT_NE(out.str().find(line), std::string::npos) << line << "in:\n" << out.str();
  }
}

}  // namespace
}  // namespace pagoda
