#include "models/weight_names.h"

#include <array>
#include <charconv>

namespace pagoda::models {

namespace {

struct NamePair {
  std::string_view gguf;
  std::string_view hf;
};

// Whole-model tensors.
constexpr std::array<NamePair, 4> kModelNames = {{
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"rope_freqs.weight", "rope_freqs.weight"},  // llama3 frequency factors; no HF tensor.
}};

// Per-layer tensors: "blk.N.<gguf>" <-> "model.layers.N.<hf>".
constexpr std::array<NamePair, 14> kLayerNames = {{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},  // Qwen3's per-head norms
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
}};

// Gemma 3's sandwich norms: llama.cpp calls its pre-MLP norm ffn_norm (Llama's
// post_attention_layernorm), and post_attention_layernorm, applied to the attention output, is
// attn_post_norm. Looked up before kLayerNames.
constexpr std::array<NamePair, 3> kGemma3LayerNames = {{
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
}};

constexpr std::string_view kGgufLayerPrefix = "blk.";

}  // namespace

std::optional<std::string> hf_name_from_gguf(std::string_view gguf_name,
                                             std::string_view architecture) {
  for (const NamePair& pair : kModelNames) {
    if (gguf_name == pair.gguf) return std::string(pair.hf);
  }
  if (!gguf_name.starts_with(kGgufLayerPrefix)) return std::nullopt;
  std::string_view rest = gguf_name.substr(kGgufLayerPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view index = rest.substr(0, dot);
  unsigned layer = 0;
  auto [end, error] = std::from_chars(index.data(), index.data() + index.size(), layer);
  if (error != std::errc() || end != index.data() + index.size()) return std::nullopt;
  const std::string_view suffix = rest.substr(dot + 1);
  if (architecture == "gemma3") {
    for (const NamePair& pair : kGemma3LayerNames) {
      if (suffix == pair.gguf) {
        return "model.layers." + std::string(index) + "." + std::string(pair.hf);
      }
    }
  }
  for (const NamePair& pair : kLayerNames) {
    if (suffix == pair.gguf) {
      return "model.layers." + std::string(index) + "." + std::string(pair.hf);
    }
  }
  return std::nullopt;
}

}  // namespace pagoda::models
