// CudaDecoderOps' Gemma 3 ops: the scaled embedding, the sandwich norm, and the lookups the
// shared ops use for Gemma's weights (the sliding layers' RoPE table).
#include <string>

#include "kernels/norm/rms_norm.h"
#include "models/cuda_decoder_ops.h"

namespace pagoda::models {

using cuda::ScalarType;

// transformers multiplies the embedding by the scale as a tensor of the activation dtype
// (Gemma3TextScaledWordEmbedding's embed_scale), so sqrt(640) = 25.298 runs as 25.25 in bf16.
Status CudaDecoderOps::embed_scaled(float scale) {
  const ScalarType t = e_.options_.dtype;
  std::uint32_t bits = 0;
  cuda::convert_from_f32(&scale, 1, t, &bits);
  float rounded = 0.0f;
  cuda::convert_to_f32(&bits, 1, t, &rounded);
  return e_.weights_.embed_tokens.gather_rows(e_.metadata_.token_ids(), shape_.num_tokens, rounded,
                                              e_.residual_.data(), t, e_.stream_.get());
}

const void* CudaDecoderOps::gemma3_norm_weight(std::int64_t layer, NormWeight weight) const {
  const auto& gemma = e_.weights_.gemma3.layers;
  const auto i = static_cast<std::size_t>(layer);
  switch (weight) {
    case NormWeight::kPreFeedforward:
      return i < gemma.size() ? gemma[i].pre_feedforward_layernorm.data() : nullptr;
    case NormWeight::kPostFeedforward:
      return i < gemma.size() ? gemma[i].post_feedforward_layernorm.data() : nullptr;
    case NormWeight::kInput: return layer_weights(layer).input_layernorm.data();
    case NormWeight::kPostAttention: return layer_weights(layer).post_attention_layernorm.data();
    case NormWeight::kFinal: return e_.weights_.norm.data();
    case NormWeight::kQ: return layer_weights(layer).q_norm.data();
    case NormWeight::kK: return layer_weights(layer).k_norm.data();
  }
  return nullptr;
}

// Two launches of the RMSNorm kernel, which may not write where it reads: the sublayer output
// (proj_) is normed into gate_up_, free between the sublayers, and then added to the residual
// and normed into normed_. The normed output is rounded to the activation dtype before the add,
// as transformers' bf16 Gemma3RMSNorm output is.
Status CudaDecoderOps::post_norm_add_rms_norm(std::int64_t layer, NormWeight post,
                                              std::int64_t next_layer, NormWeight next) {
  fp8_codes_for_ = nullptr;  // normed_ without codes
  const ModelConfig& c = e_.config_;
  const void* w_post = gemma3_norm_weight(layer, post);
  const void* w_next = gemma3_norm_weight(next_layer, next);
  if (w_post == nullptr || w_next == nullptr) {
    return Status(StatusCode::kFailedPrecondition,
                  "post_norm_add_rms_norm: the model has no sandwich norms");
  }
  if (2 * c.intermediate_size < c.hidden_size) {
    return unimplemented("post_norm_add_rms_norm: needs 2 * intermediate_size >= hidden_size");
  }
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const ScalarType t = e_.options_.dtype;
  PAGODA_RETURN_IF_ERROR(kernels::launch_rms_norm({.x = e_.proj_.data(),
                                                   .weight = w_post,
                                                   .out = e_.gate_up_.data(),
                                                   .num_tokens = shape_.num_tokens,
                                                   .hidden = c.hidden_size,
                                                   .eps = eps,
                                                   .dtype = t},
                                                  e_.stream_.get()));
  return kernels::launch_rms_norm({.x = e_.gate_up_.data(),
                                   .residual = e_.residual_.data(),
                                   .weight = w_next,
                                   .out = e_.normed_.data(),
                                   .num_tokens = shape_.num_tokens,
                                   .hidden = c.hidden_size,
                                   .eps = eps,
                                   .dtype = t},
                                  e_.stream_.get());
}

const float* CudaDecoderOps::rope_inv_freq(RopeTable table) const {
  return table == RopeTable::kLocal ? e_.weights_.gemma3.local_inv_freq.as<float>()
                                    : e_.weights_.inv_freq.as<float>();
}

}  // namespace pagoda::models
