#include "models/qwen3.h"

namespace pagoda::models {

// x -> [RMSNorm -> attention -> +] -> [RMSNorm -> MLP -> +] -> ... -> RMSNorm,
// where attention is q, k, v = x Wq, x Wk, x Wv; q, k = RMSNorm per head
// (q_norm, k_norm); RoPE(q, k); cache (k, v); softmax(q K^T / sqrt(head_dim),
// causal) V; out = attn Wo.
Status qwen3_forward(DecoderOps& ops, const ModelConfig& config) {
  const std::int64_t num_layers = config.num_hidden_layers;
  PAGODA_RETURN_IF_ERROR(ops.embed());
  PAGODA_RETURN_IF_ERROR(ops.rms_norm(0, NormWeight::kInput));
  for (std::int64_t i = 0; i < num_layers; ++i) {
    PAGODA_RETURN_IF_ERROR(ops.qkv_projection(i));
    PAGODA_RETURN_IF_ERROR(ops.head_rms_norm(i));
    PAGODA_RETURN_IF_ERROR(ops.rope_and_cache_write(i, RopeTable::kGlobal));
    PAGODA_RETURN_IF_ERROR(ops.attention(i, {}));
    PAGODA_RETURN_IF_ERROR(ops.output_projection(i));
    PAGODA_RETURN_IF_ERROR(ops.add_rms_norm(i, NormWeight::kPostAttention));
    PAGODA_RETURN_IF_ERROR(ops.gated_mlp(i, GatedActivation::kSilu));
    const bool last_layer = i + 1 == num_layers;
    PAGODA_RETURN_IF_ERROR(last_layer ? ops.add_rms_norm(i, NormWeight::kFinal)
                                      : ops.add_rms_norm(i + 1, NormWeight::kInput));
  }
  return Status::ok_status();
}

}  // namespace pagoda::models
