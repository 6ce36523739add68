// Rotary position embedding, computed in float32 in the order HF transformers uses
// (LlamaRotaryEmbedding + apply_rotary_pos_emb), so positions rotate bit for bit as HF's do.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::cpu {

/// Which dimensions form a rotated pair.
enum class RopeStyle : std::uint8_t {
  kRotateHalf,     ///< HF / NeoX: (i, i + head_dim/2).
  kAdjacentPairs,  ///< GPT-J / llama.cpp-converted GGUF (Q, K rows permuted): (2i, 2i + 1).
};

/// HF's rope_scaling "rope_type".
enum class RopeScalingType : std::uint8_t { kNone, kLinear, kLlama3 };

/// HF's rope_scaling parameters; fields beyond `factor` matter for kLlama3 only.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
};

/// inv_freq [head_dim / 2]: 1 / theta^(2i / head_dim) in float32, then scaled as HF's
/// _compute_linear_scaling_rope_parameters / _compute_llama3_parameters do.
std::vector<float> rope_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling);

/// Rotates q and k in place: token t by angle positions[t] * inv_freq[i] for pair i.
void apply_rope(const float* inv_freq /* [head_dim / 2] */, RopeStyle style,
                const std::int32_t* positions /* [num_tokens] */, std::int64_t num_tokens,
                float* q /* [num_tokens, num_heads, head_dim] */, std::int64_t num_heads,
                float* k /* [num_tokens, num_kv_heads, head_dim] */, std::int64_t num_kv_heads,
                std::int64_t head_dim);

/// Oracle of apply_rope: the angle's cos and sin recomputed for every element.
void apply_rope_reference(const float* inv_freq /* [head_dim / 2] */, RopeStyle style,
                          const std::int32_t* positions /* [num_tokens] */, std::int64_t num_tokens,
                          float* q /* [num_tokens, num_heads, head_dim] */, std::int64_t num_heads,
                          float* k /* [num_tokens, num_kv_heads, head_dim] */,
                          std::int64_t num_kv_heads, std::int64_t head_dim);

}  // namespace pagoda::cpu
