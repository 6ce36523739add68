// The shape of a decoder-only transformer, filled from a GGUF file's metadata or a Hugging Face
// config.json, so the engine never asks which format a model came in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// How RoPE frequencies are rescaled for contexts beyond the trained length.
enum class RopeScalingType : std::uint8_t {
  kNone,
  kLinear,  ///< positions divided by factor
  kLlama3,  ///< Llama 3.1's frequency-band interpolation
  kYarn,
};

/// "none", "linear", "llama3", "yarn".
const char* rope_scaling_type_name(RopeScalingType type);

/// RoPE scaling parameters. GGUF keys are `<arch>.rope.scaling.*`; config.json is `rope_scaling`.
struct RopeScaling {
  /// GGUF `rope.scaling.type`; config.json `rope_scaling.rope_type` (or `.type`).
  RopeScalingType type = RopeScalingType::kNone;
  /// GGUF `rope.scaling.factor`; config.json `rope_scaling.factor`.
  double factor = 1.0;
  /// config.json `rope_scaling.low_freq_factor` (llama3); not in GGUF.
  double low_freq_factor = 1.0;
  /// config.json `rope_scaling.high_freq_factor` (llama3); not in GGUF.
  double high_freq_factor = 4.0;
  /// GGUF `rope.scaling.original_context_length`;
  /// config.json `rope_scaling.original_max_position_embeddings`.
  std::int64_t original_max_position_embeddings = 0;
};

/// What one attention layer sees (config.json `layer_types`).
enum class AttentionType : std::uint8_t {
  kFull,     ///< every earlier position
  kSliding,  ///< the last `sliding_window` positions
};

/// Hyperparameters of a Llama-family model.
struct ModelConfig {
  /// GGUF `general.architecture`; config.json `model_type` ("llama", "mistral", "qwen2").
  std::string architecture;
  /// GGUF `<arch>.block_count`; config.json `num_hidden_layers`.
  std::int64_t num_hidden_layers = 0;
  /// GGUF `<arch>.embedding_length`; config.json `hidden_size`.
  std::int64_t hidden_size = 0;
  /// GGUF `<arch>.feed_forward_length`; config.json `intermediate_size`.
  std::int64_t intermediate_size = 0;
  /// GGUF `<arch>.attention.head_count`; config.json `num_attention_heads`.
  std::int64_t num_attention_heads = 0;
  /// GGUF `<arch>.attention.head_count_kv`; config.json `num_key_value_heads` (default: heads).
  std::int64_t num_key_value_heads = 0;
  /// GGUF `<arch>.attention.key_length` or `<arch>.rope.dimension_count`; config.json `head_dim`;
  /// hidden_size / num_attention_heads when absent.
  std::int64_t head_dim = 0;
  /// GGUF `<arch>.vocab_size` or the length of `tokenizer.ggml.tokens`; config.json `vocab_size`.
  std::int64_t vocab_size = 0;
  /// GGUF `<arch>.context_length`; config.json `max_position_embeddings`.
  std::int64_t max_position_embeddings = 0;
  /// GGUF `<arch>.attention.layer_norm_rms_epsilon`; config.json `rms_norm_eps`.
  double rms_norm_eps = 1e-6;
  /// GGUF `<arch>.rope.freq_base`; config.json `rope_theta`.
  double rope_theta = 10000.0;
  /// See RopeScaling.
  RopeScaling rope_scaling;
  /// GGUF: true when there is no `output.weight` tensor; config.json `tie_word_embeddings`.
  bool tie_word_embeddings = false;
  /// Q, K, V projections carry biases (Qwen2). GGUF: `blk.0.attn_q.bias` exists;
  /// config.json `attention_bias`, true by default for qwen2.
  bool attention_bias = false;
  /// GGUF `tokenizer.ggml.bos_token_id`; config.json / generation_config.json `bos_token_id`.
  std::optional<std::int64_t> bos_token_id;
  /// GGUF `tokenizer.ggml.eos_token_id` (plus `tokenizer.ggml.eot_token_id`); config.json and
  /// generation_config.json `eos_token_id` (an int or a list), merged without duplicates.
  std::vector<std::int64_t> eos_token_ids;
  /// config.json `torch_dtype` (or `dtype`), e.g. "bfloat16"; empty when unknown (GGUF).
  std::string torch_dtype;

  // Interleaved sliding-window attention and Gemma's score scale (Gemma 3). Models without them
  // leave these empty: every layer full, scores scaled by head_dim^-1/2, one RoPE base.
  /// Per layer; empty means all kFull. config.json `layer_types`; GGUF gemma3: every 6th layer
  /// full, the rest sliding (llama.cpp's pattern; `<arch>.attention.sliding_window_pattern` if
  /// present).
  std::vector<AttentionType> layer_types;
  /// GGUF `<arch>.attention.sliding_window`; config.json `sliding_window`. A sliding layer's
  /// position i attends to the positions j with i - sliding_window < j <= i.
  std::int64_t sliding_window = 0;
  /// RoPE base of the sliding layers (rope_theta is the full layers'). GGUF
  /// `<arch>.rope.freq_base_swa`, else 10000 for gemma3 (its GGUF does not store it);
  /// config.json `rope_local_base_freq`.
  std::optional<double> rope_local_theta;
  /// Attention scores are scaled by query_pre_attn_scalar^-1/2. config.json
  /// `query_pre_attn_scalar`; GGUF gemma3: head_dim (hidden_size / heads for the 62-layer 27B), as
  /// llama.cpp derives it.
  std::optional<double> query_pre_attn_scalar;
  /// Attention scores are soft-capped, s = cap * tanh(s / cap). config.json
  /// `attn_logit_softcapping` (Gemma 2; null in Gemma 3); unset means none.
  std::optional<double> attn_logit_softcapping;

  /// OK when the fields describe a buildable model; otherwise names the bad field.
  Status validate() const;
};

/// Sampling defaults a checkpoint ships (generation_config.json); unset fields mean "no opinion".
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<std::int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<std::int64_t> max_new_tokens;
  std::optional<bool> do_sample;
};

}  // namespace pagoda
