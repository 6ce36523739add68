#include "pagoda/model_config.h"

#include <algorithm>
#include <string>

namespace pagoda {

const char* rope_scaling_type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
  }
  return "unknown";
}

namespace {

Status bad_field(const std::string& field, const std::string& problem) {
  return invalid_argument("model config: " + field + " " + problem);
}

}  // namespace

Status ModelConfig::validate() const {
  if (architecture.empty()) return bad_field("architecture", "is empty");
  const std::pair<const char*, std::int64_t> positive[] = {
      {"num_hidden_layers", num_hidden_layers},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
      {"vocab_size", vocab_size},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [name, value] : positive) {
    if (value <= 0) return bad_field(name, "must be positive, got " + std::to_string(value));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return bad_field("num_key_value_heads", "(" + std::to_string(num_key_value_heads) +
                                                ") must divide num_attention_heads (" +
                                                std::to_string(num_attention_heads) + ")");
  }
  if (head_dim % 2 != 0) {
    return bad_field("head_dim",
                     "must be even for rotary embeddings, got " + std::to_string(head_dim));
  }
  if (!(rms_norm_eps > 0)) return bad_field("rms_norm_eps", "must be positive");
  if (!(rope_theta > 0)) return bad_field("rope_theta", "must be positive");
  if (rope_scaling.type != RopeScalingType::kNone && !(rope_scaling.factor > 0)) {
    return bad_field("rope_scaling.factor", "must be positive");
  }
  if (rope_scaling.type == RopeScalingType::kLlama3 &&
      (rope_scaling.original_max_position_embeddings <= 0 ||
       !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))) {
    return bad_field("rope_scaling",
                     "of type llama3 needs original_max_position_embeddings > 0 and "
                     "high_freq_factor > low_freq_factor");
  }
  if (!layer_types.empty() && static_cast<std::int64_t>(layer_types.size()) != num_hidden_layers) {
    return bad_field("layer_types", "has " + std::to_string(layer_types.size()) + " entries for " +
                                        std::to_string(num_hidden_layers) + " layers");
  }
  const bool slides = std::find(layer_types.begin(), layer_types.end(), AttentionType::kSliding) !=
                      layer_types.end();
  if (slides && sliding_window <= 0) {
    return bad_field("sliding_window",
                     "must be positive when a layer slides, got " + std::to_string(sliding_window));
  }
  if (rope_local_theta && !(*rope_local_theta > 0)) {
    return bad_field("rope_local_base_freq", "must be positive");
  }
  if (query_pre_attn_scalar && !(*query_pre_attn_scalar > 0)) {
    return bad_field("query_pre_attn_scalar", "must be positive");
  }
  if (attn_logit_softcapping && !(*attn_logit_softcapping > 0)) {
    return bad_field("attn_logit_softcapping", "must be positive or null");
  }
  const auto in_vocab = [&](std::int64_t id) { return id >= 0 && id < vocab_size; };
  if (bos_token_id && !in_vocab(*bos_token_id)) {
    return bad_field("bos_token_id", std::to_string(*bos_token_id) + " is outside the vocabulary");
  }
  for (std::int64_t id : eos_token_ids) {
    if (!in_vocab(id)) {
      return bad_field("eos_token_id", std::to_string(id) + " is outside the vocabulary");
    }
  }
  return {};
}

}  // namespace pagoda
