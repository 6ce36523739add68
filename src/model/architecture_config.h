// The architecture registry's config half: per architecture, what config.json leaves to its
// transformers config class and what GGUF metadata leaves to llama.cpp. The rest of each entry
// (layer loop, optional weights, GGUF RoPE style: src/models/architecture.h) lives in the models
// library, which sits above this one; the config readers here (hf_config.cc, gguf_config.cc)
// apply these defaults, so they live below the readers and the dependency points one way. The
// two halves are keyed by the same names, and ArchitectureRegistry's tests check that every
// registered architecture has its config entry and no config entry lacks an architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "pagoda/model_config.h"

namespace pagoda {

/// Interleaved sliding-window and full attention layers, each kind with its own RoPE base, and
/// a score scale of their own (Gemma 3): what the files leave out.
struct InterleavedAttentionDefaults {
  /// config.json `sliding_window` when absent (GGUF must store it).
  std::int64_t sliding_window = 0;
  /// Every n-th layer is full, the rest slide: config.json `sliding_window_pattern` (written by
  /// transformers 4.x; 5.x writes `layer_types`) and GGUF `<arch>.attention.sliding_window_pattern`
  /// when absent, as llama.cpp fixes it for the architecture.
  std::int64_t sliding_window_pattern = 0;
  /// config.json `query_pre_attn_scalar` when absent.
  double query_pre_attn_scalar = 0.0;
  /// The sliding layers' RoPE base when neither config.json (`rope_local_base_freq`,
  /// `rope_parameters.sliding_attention.rope_theta`) nor GGUF (`<arch>.rope.freq_base_swa`) has it.
  double rope_local_theta = 10000.0;
  /// GGUF stores no score scale: llama.cpp derives it from the shape (`config` read so far).
  double (*gguf_query_pre_attn_scalar)(const ModelConfig& config) = nullptr;
};

/// One architecture's config defaults, under its config.json `model_type` / GGUF
/// `general.architecture`.
struct ArchitectureConfig {
  std::string_view name;
  /// config.json `tie_word_embeddings` when absent: PretrainedConfig ties; LlamaConfig and most
  /// decoder configs since untie.
  bool tie_word_embeddings = true;
  /// Q, K and V carry biases whatever config.json `attention_bias` says (Qwen2's attention
  /// hard-codes them); otherwise `attention_bias`, false when absent.
  bool qkv_bias_always = false;
  /// config.json `head_dim` when absent; nullopt: hidden_size / num_attention_heads.
  std::optional<std::int64_t> head_dim;
  /// config.json's RoPE base (`rope_theta`, or the full layers' in `rope_parameters`) when
  /// absent. GGUF files without `<arch>.rope.freq_base` get llama.cpp's 10000 whatever this says.
  double rope_theta = 10000.0;
  /// Set for architectures whose layers interleave sliding-window and full attention; their
  /// keys are read only then.
  std::optional<InterleavedAttentionDefaults> interleaved_attention;
  /// Set for architectures whose every layer slides by config.json `sliding_window` (Mistral):
  /// the window when the key is absent; a null `sliding_window` means full attention.
  std::optional<std::int64_t> every_layer_sliding_window;
  /// A token that ends a chat turn and so stops generation like EOS, which GGUF's
  /// `tokenizer.ggml.eos_token_id` does not list (the HF checkpoints' generation_config.json does);
  /// added to eos_token_ids when the vocabulary has it. Empty: none.
  std::string_view gguf_end_of_turn_token;
};

/// The entry named `name`, or nullptr.
const ArchitectureConfig* find_architecture_config(std::string_view name);

/// The entry named `name`, or PretrainedConfig's defaults for a name the registry lacks (the
/// config is still read, so `pagoda inspect` works; loading refuses the architecture later).
const ArchitectureConfig& architecture_config(std::string_view name);

/// Every entry, in registry order.
std::span<const ArchitectureConfig> architecture_configs();

}  // namespace pagoda
