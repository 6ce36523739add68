#include "models/llama.h"

namespace pagoda::models {

// x -> [RMSNorm -> attention -> +] -> [RMSNorm -> MLP -> +] -> ... -> RMSNorm.
// Each residual add is fused with the norm that follows it (add_rms_norm), so `normed` always
// holds the next sublayer's input and `residual` the running sum.
Status llama_forward(DecoderOps& ops, const ModelConfig& config) {
  const std::int64_t num_layers = config.num_hidden_layers;
  PAGODA_RETURN_IF_ERROR(ops.embed());
  PAGODA_RETURN_IF_ERROR(ops.rms_norm(0, NormWeight::kInput));
  for (std::int64_t i = 0; i < num_layers; ++i) {
    // q, k, v = x Wq (+bq), x Wk (+bk), x Wv (+bv); RoPE(q, k); cache (k, v);
    // attn = softmax(q K^T / sqrt(d), causal [+ window]) V over the cached context; out = attn Wo.
    PAGODA_RETURN_IF_ERROR(ops.qkv_projection(i));
    PAGODA_RETURN_IF_ERROR(ops.rope_and_cache_write(i, RopeTable::kGlobal));
    // Mistral's layers may all slide (config.layer_types; empty for Llama and Qwen2).
    const bool sliding = !config.layer_types.empty() &&
                         config.layer_types[static_cast<std::size_t>(i)] == AttentionType::kSliding;
    PAGODA_RETURN_IF_ERROR(
        ops.attention(i, {.sliding_window = sliding ? config.sliding_window : 0}));
    PAGODA_RETURN_IF_ERROR(ops.output_projection(i));
    PAGODA_RETURN_IF_ERROR(ops.add_rms_norm(i, NormWeight::kPostAttention));
    // out = down(silu(gate(x)) * up(x)).
    PAGODA_RETURN_IF_ERROR(ops.gated_mlp(i, GatedActivation::kSilu));
    const bool last_layer = i + 1 == num_layers;
    PAGODA_RETURN_IF_ERROR(last_layer ? ops.add_rms_norm(i, NormWeight::kFinal)
                                      : ops.add_rms_norm(i + 1, NormWeight::kInput));
  }
  return Status::ok_status();
}

}  // namespace pagoda::models
