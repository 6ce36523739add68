#include "model/architecture_config.h"

#include <array>

namespace pagoda {

namespace {

// llama.cpp scales Gemma 3's scores by head_dim^-1/2, except in the 27B, which it tells by its
// 62 layers: hidden_size / heads there, as its query_pre_attn_scalar (168) says.
double gemma3_gguf_query_pre_attn_scalar(const ModelConfig& config) {
  return static_cast<double>(config.num_hidden_layers == 62
                                 ? config.hidden_size / config.num_attention_heads
                                 : config.head_dim);
}

// Gemma3TextConfig's defaults (transformers 5.23; the same in 4.5x): sliding_window 4096, every
// 6th layer full, query_pre_attn_scalar 256, RoPE bases 1e6 (full layers) and 1e4 (sliding),
// head_dim 256, tied embeddings. llama.cpp completes its GGUF files with the same pattern and
// local base.
constexpr InterleavedAttentionDefaults kGemma3Attention = {
    .sliding_window = 4096,
    .sliding_window_pattern = 6,
    .query_pre_attn_scalar = 256.0,
    .rope_local_theta = 10000.0,
    .gguf_query_pre_attn_scalar = gemma3_gguf_query_pre_attn_scalar,
};

constexpr ArchitectureConfig kGemma3 = {
    .name = "gemma3",
    .tie_word_embeddings = true,
    .head_dim = 256,
    .rope_theta = 1e6,
    .interleaved_attention = kGemma3Attention,
    .gguf_end_of_turn_token = "<end_of_turn>",
};

// Names as in src/models/architecture.cc. LlamaConfig, MistralConfig, Qwen2Config and
// Qwen3Config untie the embeddings by default; Qwen3Config's head_dim is 128 whatever the
// hidden size (the others divide hidden_size by the heads). MistralConfig's sliding_window is
// 4096 unless the file says otherwise (Mistral 7B v0.1 relies on it; v0.2 on write null).
constexpr std::array<ArchitectureConfig, 6> kConfigs = {{
    {.name = "llama", .tie_word_embeddings = false},
    {.name = "mistral", .tie_word_embeddings = false, .every_layer_sliding_window = 4096},
    {.name = "qwen2", .tie_word_embeddings = false, .qkv_bias_always = true},
    {.name = "qwen3", .tie_word_embeddings = false, .head_dim = 128},
    kGemma3,
    // gemma3_text: config.json's model_type for Gemma3ForCausalLM (GGUF files say gemma3).
    [] {
      ArchitectureConfig text = kGemma3;
      text.name = "gemma3_text";
      return text;
    }(),
}};

// PretrainedConfig's: tied embeddings, no biases, head_dim from the hidden size.
constexpr ArchitectureConfig kUnregistered = {.name = ""};

}  // namespace

const ArchitectureConfig* find_architecture_config(std::string_view name) {
  for (const ArchitectureConfig& c : kConfigs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const ArchitectureConfig& architecture_config(std::string_view name) {
  const ArchitectureConfig* found = find_architecture_config(name);
  return found != nullptr ? *found : kUnregistered;
}

std::span<const ArchitectureConfig> architecture_configs() {
  return kConfigs;
}

}  // namespace pagoda
