#include "models/architecture.h"

#include <array>

#include "models/gemma3.h"
#include "models/llama.h"
#include "models/qwen3.h"

namespace pagoda::models {

namespace {

// Mistral and Qwen2 are Llama's layer loop: Mistral's sliding window, when its config sets one,
// slides every layer (config.layer_types; so one KV table, the window applied in attention),
// Qwen2's QKV bias is a weight the loader finds when config.attention_bias says so.
constexpr std::array<Architecture, 6> kArchitectures = {{
    {.name = "llama",
     .hf_class = "LlamaForCausalLM",
     .gguf_rope = GgufRope::kAdjacentPairs,
     .forward = llama_forward},
    {.name = "mistral",
     .hf_class = "MistralForCausalLM",
     .gguf_rope = GgufRope::kAdjacentPairs,
     .forward = llama_forward},
    {.name = "qwen2",
     .hf_class = "Qwen2ForCausalLM",
     .gguf_rope = GgufRope::kRotateHalf,
     .forward = llama_forward},
    {.name = "qwen3",
     .hf_class = "Qwen3ForCausalLM",
     .gguf_rope = GgufRope::kRotateHalf,
     .qk_norm = true,
     .forward = qwen3_forward},
    // gemma3_text is the model_type of Gemma3ForCausalLM checkpoints (the text-only 270M / 1B);
    // its GGUF files say gemma3.
    {.name = "gemma3",
     .hf_class = "Gemma3ForCausalLM",
     .gguf_rope = GgufRope::kRotateHalf,
     .qk_norm = true,
     .sandwich_norms = true,
     .hf_norm_weight_offset = 1.0f,
     .sliding_window_layers = true,
     .forward = gemma3_forward},
    {.name = "gemma3_text",
     .hf_class = "Gemma3ForCausalLM",
     .gguf_rope = GgufRope::kRotateHalf,
     .qk_norm = true,
     .sandwich_norms = true,
     .hf_norm_weight_offset = 1.0f,
     .sliding_window_layers = true,
     .forward = gemma3_forward},
}};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

StatusOr<const Architecture*> architecture_of(const ModelConfig& config) {
  const Architecture* a = find_architecture(config.architecture);
  if (a == nullptr) {
    return unimplemented("architecture \"" + config.architecture +
                         "\" is not supported; Pagoda runs " + supported_architecture_names() +
                         " models");
  }
  return a;
}

std::string supported_architecture_names() {
  std::string names;
  for (const Architecture& a : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += a.name;
  }
  return names;
}

}  // namespace pagoda::models
