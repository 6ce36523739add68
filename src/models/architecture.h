// The architecture registry: one entry per architecture Pagoda runs, the one allowlist. An
// entry says what the config and the weight files cannot: which layer loop runs the model,
// which optional weights its layers carry, and how llama.cpp's converter left its RoPE pairs.
// Its config half, the defaults the config readers apply (transformers' per-class defaults,
// what llama.cpp fixes by architecture), is the entry of the same name in
// src/model/architecture_config.cc: the readers sit in the model library below this one.
// HF and GGUF tensor names are in one table (weight_names.cc); the weights are found by HF name
// (llama_weights.cc) and each backend groups them the way it fuses them.
#pragma once

#include <string>
#include <string_view>

#include "models/decoder_ops.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Which dimension pairs RoPE rotates in an architecture's GGUF files.
enum class GgufRope : std::uint8_t {
  kAdjacentPairs,  ///< llama.cpp permuted the Q/K rows at conversion (llama, mistral)
  kRotateHalf,     ///< left as HF wrote them (qwen2, qwen3, gemma3)
};

/// One architecture.
struct Architecture {
  std::string_view name;      ///< config.json model_type / GGUF general.architecture
  std::string_view hf_class;  ///< the transformers class it matches, for messages and docs
  GgufRope gguf_rope = GgufRope::kRotateHalf;
  /// Layers carry self_attn.q_norm / k_norm (per-head RMSNorm of q and k before RoPE).
  bool qk_norm = false;
  /// Layers carry Gemma's sandwich norms: post_attention_layernorm on the attention output,
  /// pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its output.
  bool sandwich_norms = false;
  /// Added to every RMSNorm weight of an HF checkpoint at load: Gemma's RMSNorm scales by
  /// (1 + weight); llama.cpp's converter already added the 1 to GGUF files.
  float hf_norm_weight_offset = 0.0f;
  /// The layer loop gives config.layer_types' sliding layers their window, so those layers may
  /// keep only the window's KV blocks (kv_cache_groups.h).
  bool sliding_window_layers = false;
  /// The layer loop: embedding to final norm over a backend's DecoderOps.
  Status (*forward)(DecoderOps& ops, const ModelConfig& config) = nullptr;
};

/// The entry named `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);

/// The entry for `config`, or UNIMPLEMENTED naming the architectures Pagoda runs.
StatusOr<const Architecture*> architecture_of(const ModelConfig& config);

/// "llama, mistral, qwen2, qwen3": the registry's names, for messages.
std::string supported_architecture_names();

}  // namespace pagoda::models
