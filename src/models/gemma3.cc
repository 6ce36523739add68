#include "models/gemma3.h"

#include <cmath>

namespace pagoda::models {

// x = embed(ids) * sqrt(hidden), then per layer (sandwich norms around both sublayers):
//
//   h = x + post_attention_norm(attention(input_norm(x)))
//   x = h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))
//
// where attention is q, k, v = x Wq, x Wk, x Wv; q, k = RMSNorm per head (q_norm, k_norm);
// RoPE(q, k) with the layer's base (rope_local_base_freq on sliding layers, rope_theta and its
// scaling on full ones); cache (k, v); softmax(q K^T * query_pre_attn_scalar^-1/2, causal, the
// last sliding_window positions on sliding layers) V; out = attn Wo; and the MLP is
// down(gelu_tanh(gate(x)) * up(x)). Each post-norm is fused with its residual add and the next
// sublayer's norm (post_norm_add_rms_norm), so `normed` always holds the next sublayer's input.
Status gemma3_forward(DecoderOps& ops, const ModelConfig& config) {
  const std::int64_t num_layers = config.num_hidden_layers;
  const float softmax_scale =
      config.query_pre_attn_scalar
          ? static_cast<float>(1.0 / std::sqrt(*config.query_pre_attn_scalar))
          : 0.0f;
  PAGODA_RETURN_IF_ERROR(
      ops.embed_scaled(static_cast<float>(std::sqrt(static_cast<double>(config.hidden_size)))));
  PAGODA_RETURN_IF_ERROR(ops.rms_norm(0, NormWeight::kInput));
  for (std::int64_t i = 0; i < num_layers; ++i) {
    const bool sliding = !config.layer_types.empty() &&
                         config.layer_types[static_cast<std::size_t>(i)] == AttentionType::kSliding;
    const AttentionOptions attention{
        .softmax_scale = softmax_scale,
        .sliding_window = sliding ? config.sliding_window : 0,
        .logit_softcap = static_cast<float>(config.attn_logit_softcapping.value_or(0.0)),
    };
    PAGODA_RETURN_IF_ERROR(ops.qkv_projection(i));
    PAGODA_RETURN_IF_ERROR(ops.head_rms_norm(i));
    PAGODA_RETURN_IF_ERROR(
        ops.rope_and_cache_write(i, sliding ? RopeTable::kLocal : RopeTable::kGlobal));
    PAGODA_RETURN_IF_ERROR(ops.attention(i, attention));
    PAGODA_RETURN_IF_ERROR(ops.output_projection(i));
    PAGODA_RETURN_IF_ERROR(
        ops.post_norm_add_rms_norm(i, NormWeight::kPostAttention, i, NormWeight::kPreFeedforward));
    PAGODA_RETURN_IF_ERROR(ops.gated_mlp(i, GatedActivation::kGeluTanh));
    const bool last_layer = i + 1 == num_layers;
    PAGODA_RETURN_IF_ERROR(last_layer ? ops.post_norm_add_rms_norm(i, NormWeight::kPostFeedforward,
                                                                   i, NormWeight::kFinal)
                                      : ops.post_norm_add_rms_norm(i, NormWeight::kPostFeedforward,
                                                                   i + 1, NormWeight::kInput));
  }
  return Status::ok_status();
}

}  // namespace pagoda::models
