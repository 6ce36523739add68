#include "models/cuda_decoder_ops.h"

#include <cmath>

#include "kernels/activation/gelu_tanh_mul.h"
#include "kernels/activation/silu_mul.h"
#include "kernels/norm/head_rms_norm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/rope/rope_kv_cache.h"

namespace pagoda::models {

using cuda::ScalarType;

const void* CudaDecoderOps::norm_weight(std::int64_t layer, NormWeight weight) const {
  if (weight == NormWeight::kFinal) return e_.weights_.norm.data();
  const CudaLayerWeights& l = layer_weights(layer);
  switch (weight) {
    case NormWeight::kInput: return l.input_layernorm.data();
    case NormWeight::kPostAttention: return l.post_attention_layernorm.data();
    case NormWeight::kQ: return l.q_norm.data();
    case NormWeight::kK: return l.k_norm.data();
    case NormWeight::kPreFeedforward:
    case NormWeight::kPostFeedforward: return gemma3_norm_weight(layer, weight);  // null if absent
    case NormWeight::kFinal: break;
  }
  return e_.weights_.norm.data();
}

std::int64_t CudaDecoderOps::qkv_dim() const {
  const ModelConfig& c = e_.config_;
  return (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
}

std::int32_t CudaDecoderOps::kv_group(std::int64_t layer) const {
  if (!shape_.kv_groups || e_.info_.kv_group_of_layer.empty()) return 0;
  return e_.info_.kv_group_of_layer[static_cast<std::size_t>(layer)];
}

// A sliding layer's K/V goes to its group's pool at its group's slots, and its attention reads
// its group's tables: -1 below each sequence's window, which the kernels never index (the
// decode kernels start at seq_len - window, the prefill kernel at its tile's first window key).
const std::int64_t* CudaDecoderOps::slot_mapping(std::int64_t layer) const {
  const std::int32_t group = kv_group(layer);
  return group == 0 ? e_.metadata_.slot_mapping()
                    : e_.metadata_.group_slot_mapping(static_cast<std::size_t>(group - 1));
}

const std::int32_t* CudaDecoderOps::block_tables(std::int64_t layer) const {
  const std::int32_t group = kv_group(layer);
  return group == 0 ? e_.metadata_.block_tables()
                    : e_.metadata_.group_block_tables(static_cast<std::size_t>(group - 1));
}

kernels::PagedKvCache CudaDecoderOps::cache(std::int64_t layer) const {
  const auto i = static_cast<std::size_t>(e_.kv_slot_[static_cast<std::size_t>(layer)]);
  // The checkpoint's per-layer scales (or 1) apply to FP8 codes only.
  const bool fp8 = e_.options_.kv_cache_storage == kernels::KvCacheStorage::kFp8E4M3;
  return {.k = e_.k_cache_[i].data(),
          .v = e_.v_cache_[i].data(),
          .num_blocks = e_.num_blocks_,
          .block_size = e_.block_size_,
          .num_kv_heads = e_.config_.num_key_value_heads,
          .head_dim = e_.config_.head_dim,
          .storage = e_.options_.kv_cache_storage,
          .k_scale = fp8 ? layer_weights(layer).k_cache_scale : 1.0f,
          .v_scale = fp8 ? layer_weights(layer).v_cache_scale : 1.0f};
}

Status CudaDecoderOps::embed() {
  return e_.weights_.embed_tokens.gather_rows(e_.metadata_.token_ids(), shape_.num_tokens, 1.0f,
                                              e_.residual_.data(), e_.options_.dtype,
                                              e_.stream_.get());
}

const CudaLinearLayer* CudaDecoderOps::fp8_consumer(const CudaLinearLayer* layer) const {
  const bool fp8 = layer != nullptr && layer->kind() == DeviceLinearKind::kFp8;
  return fp8 && e_.fp8_codes_.data() != nullptr ? layer : nullptr;
}

// Llama's norms: the input norm feeds QKV, the post-attention norm gate/up (Gemma 3's sandwich
// norms go through post_norm_add_rms_norm, which writes no codes).
const CudaLinearLayer* CudaDecoderOps::normed_consumer(std::int64_t layer,
                                                       NormWeight weight) const {
  if (layer < 0 || layer >= static_cast<std::int64_t>(e_.weights_.layers.size())) return nullptr;
  if (weight == NormWeight::kInput) return fp8_consumer(&layer_weights(layer).qkv_proj);
  if (weight == NormWeight::kPostAttention) return fp8_consumer(&layer_weights(layer).gate_up_proj);
  return nullptr;
}

// normed = RMSNorm(x, or x + residual written back into residual); with an FP8 consumer the norm
// also writes its output's codes (RmsNormParams::out_fp8), so the consumer skips its own
// quantization pass.
Status CudaDecoderOps::launch_norm(const void* x, void* residual, std::int64_t layer,
                                   NormWeight weight) {
  fp8_codes_for_ = normed_consumer(layer, weight);
  const bool codes = fp8_codes_for_ != nullptr;
  return kernels::launch_rms_norm({.x = x,
                                   .residual = residual,
                                   .weight = norm_weight(layer, weight),
                                   .out = e_.normed_.data(),
                                   .num_tokens = shape_.num_tokens,
                                   .hidden = e_.config_.hidden_size,
                                   .eps = static_cast<float>(e_.config_.rms_norm_eps),
                                   .dtype = e_.options_.dtype,
                                   .out_fp8 = codes ? e_.fp8_codes_.as<std::uint8_t>() : nullptr,
                                   .out_fp8_scales = codes ? e_.fp8_scales_.as<float>() : nullptr},
                                  e_.stream_.get());
}

Status CudaDecoderOps::rms_norm(std::int64_t layer, NormWeight weight) {
  return launch_norm(e_.residual_.data(), nullptr, layer, weight);
}

Status CudaDecoderOps::add_rms_norm(std::int64_t layer, NormWeight weight) {
  return launch_norm(e_.proj_.data(), e_.residual_.data(), layer, weight);
}

Status CudaDecoderOps::linear(const CudaLinearLayer& layer, const cuda::DeviceBuffer& x,
                              const void* bias, cuda::DeviceBuffer& y) {
  const LinearScratch scratch{.data = e_.linear_scratch_.data(),
                              .bytes = e_.linear_scratch_.bytes()};
  if (fp8_codes_for_ == &layer) {
    return layer.forward_fp8_codes(e_.fp8_codes_.as<std::uint8_t>(), e_.fp8_scales_.as<float>(),
                                   shape_.num_tokens, bias, y.data(), e_.options_.dtype, *e_.blas_,
                                   scratch, e_.stream_.get());
  }
  return layer.forward(x.data(), shape_.num_tokens, bias, y.data(), e_.options_.dtype, *e_.blas_,
                       scratch, e_.stream_.get());
}

Status CudaDecoderOps::qkv_projection(std::int64_t layer) {
  const CudaLayerWeights& l = layer_weights(layer);
  return linear(l.qkv_proj, e_.normed_, l.qkv_bias.data(), e_.qkv_);
}

// q and k sit side by side in each QKV row: [q heads | k heads | v heads].
Status CudaDecoderOps::head_rms_norm(std::int64_t layer) {
  const ModelConfig& c = e_.config_;
  const CudaLayerWeights& l = layer_weights(layer);
  if (l.q_norm.data() == nullptr || l.k_norm.data() == nullptr) {
    return Status(StatusCode::kFailedPrecondition, "head_rms_norm: the model has no q/k norms");
  }
  const ScalarType t = e_.options_.dtype;
  auto* qkv = static_cast<std::uint8_t*>(e_.qkv_.data());
  const std::size_t k_offset_bytes =
      static_cast<std::size_t>(c.num_attention_heads * c.head_dim) * cuda::scalar_type_size(t);
  kernels::HeadRmsNormParams p{.x = qkv,
                               .row_stride = qkv_dim(),
                               .weight = l.q_norm.data(),
                               .num_tokens = shape_.num_tokens,
                               .num_heads = c.num_attention_heads,
                               .head_dim = c.head_dim,
                               .eps = static_cast<float>(c.rms_norm_eps),
                               .dtype = t};
  PAGODA_RETURN_IF_ERROR(kernels::launch_head_rms_norm(p, e_.stream_.get()));
  p.x = qkv + k_offset_bytes;
  p.weight = l.k_norm.data();
  p.num_heads = c.num_key_value_heads;
  return kernels::launch_head_rms_norm(p, e_.stream_.get());
}

Status CudaDecoderOps::rope_and_cache_write(std::int64_t layer, RopeTable table) {
  if (rope_inv_freq(table) == nullptr) {
    return Status(StatusCode::kFailedPrecondition,
                  "rope_and_cache_write: the config has no local RoPE base");
  }
  return kernels::launch_rope_kv_cache({.qkv = e_.qkv_.data(),
                                        .qkv_row_stride = qkv_dim(),
                                        .positions = e_.metadata_.positions(),
                                        .slot_mapping = slot_mapping(layer),
                                        .inv_freq = rope_inv_freq(table),
                                        .cache = cache(layer),
                                        .num_tokens = shape_.num_tokens,
                                        .num_heads = e_.config_.num_attention_heads,
                                        .style = e_.weights_.rope_style,
                                        .dtype = e_.options_.dtype},
                                       e_.stream_.get());
}

// Pure prefill steps run the prefill kernel, pure decode steps the split-K decode kernel. A mixed
// step runs both over the one batch and the one output: the prefill kernel (over the range of
// sequences that holds the longer ones) skips the sequences that bring one query, and the decode
// kernel (and its split merge) runs only those, listed in the step metadata; each writes its own
// sequences' rows of attn_. Windows, soft-cap, the FP8 cache and a KV group's tables
// (block_tables(layer), read by sequence index) are the same parameters for both.
Status CudaDecoderOps::attention(std::int64_t layer, const AttentionOptions& options) {
  const ModelConfig& c = e_.config_;
  const float scale = options.softmax_scale != 0.0f
                          ? options.softmax_scale
                          : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  kernels::PagedAttentionParams params{.q = e_.qkv_.data(),
                                       .q_row_stride = qkv_dim(),
                                       .out = e_.attn_.data(),
                                       .cache = cache(layer),
                                       .query_start_loc = e_.metadata_.query_start_loc(),
                                       .seq_lens = e_.metadata_.seq_lens(),
                                       .block_tables = block_tables(layer),
                                       .num_seqs = shape_.num_seqs,
                                       .max_blocks_per_seq = shape_.block_table_stride,
                                       .num_heads = c.num_attention_heads,
                                       .softmax_scale = scale,
                                       .sliding_window = options.sliding_window,
                                       .logit_softcap = options.logit_softcap,
                                       .dtype = e_.options_.dtype};
  const kernels::DecodeWorkspace workspace{.partial_out = e_.decode_partial_out_.as<float>(),
                                           .partial_lse = e_.decode_partial_lse_.as<float>(),
                                           .capacity_floats = e_.decode_workspace_floats_};
  CudaModelExecutor::AttentionPathCounts& paths = e_.attention_paths_;
  if (shape_.decode) {
    ++paths.decode;
    return kernels::launch_paged_decode_attention(params, shape_.plan, workspace, e_.stream_.get());
  }
  if (!shape_.mixed) {
    ++paths.prefill;
    return kernels::launch_paged_prefill_attention(params, shape_.max_query_len, e_.stream_.get());
  }
  ++paths.mixed;
  // The prefill kernel over the sequences from the first to the last with more than one query:
  // its arrays offset to the first (query_start_loc holds absolute token rows, so q and out
  // stay as they are), the one-query sequences inside skipped.
  kernels::PagedAttentionParams prefill = params;
  const std::int64_t first = shape_.first_prefill_seq;
  prefill.query_start_loc += first;
  prefill.seq_lens += first;
  prefill.block_tables += first * shape_.block_table_stride;
  prefill.num_seqs = shape_.num_prefill_range;
  prefill.skip_single_query = true;
  PAGODA_RETURN_IF_ERROR(
      kernels::launch_paged_prefill_attention(prefill, shape_.max_query_len, e_.stream_.get()));
  params.num_seqs = shape_.num_decode_seqs;
  params.decode_seq_ids = e_.metadata_.decode_seq_ids();
  return kernels::launch_paged_decode_attention(params, shape_.plan, workspace, e_.stream_.get());
}

Status CudaDecoderOps::output_projection(std::int64_t layer) {
  return linear(layer_weights(layer).o_proj, e_.attn_, nullptr, e_.proj_);
}

Status CudaDecoderOps::gated_mlp(std::int64_t layer, GatedActivation activation) {
  const ModelConfig& c = e_.config_;
  const ScalarType t = e_.options_.dtype;
  const cudaStream_t stream = e_.stream_.get();
  const CudaLayerWeights& l = layer_weights(layer);
  const std::int64_t n = shape_.num_tokens;
  PAGODA_RETURN_IF_ERROR(linear(l.gate_up_proj, e_.normed_, nullptr, e_.gate_up_));
  const auto launch_gate = activation == GatedActivation::kSilu ? kernels::launch_silu_mul
                                                                : kernels::launch_gelu_tanh_mul;
  // An FP8 down projection takes the gate's codes (SiluMulParams::out_fp8).
  fp8_codes_for_ = fp8_consumer(&l.down_proj);
  PAGODA_RETURN_IF_ERROR(launch_gate(
      {.gate_up = e_.gate_up_.data(),
       .gate_up_row_stride = 2 * c.intermediate_size,
       .out = e_.act_.data(),
       .num_tokens = n,
       .width = c.intermediate_size,
       .dtype = t,
       .out_fp8 = fp8_codes_for_ != nullptr ? e_.fp8_codes_.as<std::uint8_t>() : nullptr,
       .out_fp8_scales = fp8_codes_for_ != nullptr ? e_.fp8_scales_.as<float>() : nullptr},
      stream));
  return linear(l.down_proj, e_.act_, nullptr, e_.proj_);
}

}  // namespace pagoda::models
