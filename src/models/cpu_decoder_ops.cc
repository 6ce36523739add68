#include "models/cpu_decoder_ops.h"

#include <array>
#include <cmath>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/gelu_tanh.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/windowed_attention.h"

namespace pagoda::models {

namespace {

std::vector<float> buffer(std::int64_t rows, std::int64_t cols) {
  return std::vector<float>(static_cast<std::size_t>(rows * cols));
}

const float* bias_or_null(const std::vector<float>& bias) {
  return bias.empty() ? nullptr : bias.data();
}

}  // namespace

CpuActivations::CpuActivations(const ModelConfig& c, std::int64_t max_tokens)
    : residual(buffer(max_tokens, c.hidden_size)),
      normed(buffer(max_tokens, c.hidden_size)),
      q(buffer(max_tokens, c.num_attention_heads * c.head_dim)),
      k(buffer(max_tokens, c.num_key_value_heads * c.head_dim)),
      v(buffer(max_tokens, c.num_key_value_heads * c.head_dim)),
      attn(buffer(max_tokens, c.num_attention_heads * c.head_dim)),
      out(buffer(max_tokens, c.hidden_size)),
      gate(buffer(max_tokens, c.intermediate_size)),
      up(buffer(max_tokens, c.intermediate_size)),
      act(buffer(max_tokens, c.intermediate_size)),
      last(buffer(max_tokens, c.hidden_size)) {}

CpuDecoderOps::CpuDecoderOps(const ModelConfig& config, LlamaWeights weights,
                             std::int64_t max_tokens)
    : config_(config), weights_(std::move(weights)), a_(config, max_tokens) {}

void CpuDecoderOps::bind(cpu::ThreadPool& pool, const ForwardBatch& batch,
                         std::span<const cpu::KvCacheView> kv_cache,
                         std::span<const std::int32_t> kv_group_of_layer) {
  pool_ = &pool;
  batch_ = &batch;
  kv_cache_ = kv_cache;
  kv_group_of_layer_ = kv_group_of_layer;
}

std::int32_t CpuDecoderOps::kv_group(std::int64_t layer) const {
  if (batch_->kv_groups.empty() || kv_group_of_layer_.empty()) return 0;
  return kv_group_of_layer_[static_cast<std::size_t>(layer)];
}

const std::int64_t* CpuDecoderOps::slot_mapping(std::int64_t layer) const {
  const std::int32_t group = kv_group(layer);
  return group == 0 ? batch_->slot_mapping.data()
                    : batch_->kv_groups[static_cast<std::size_t>(group - 1)].slot_mapping.data();
}

const std::int32_t* CpuDecoderOps::block_tables(std::int64_t layer) const {
  const std::int32_t group = kv_group(layer);
  return group == 0 ? batch_->block_tables.data()
                    : batch_->kv_groups[static_cast<std::size_t>(group - 1)].block_tables.data();
}

const float* CpuDecoderOps::norm_weight(std::int64_t layer, NormWeight weight) const {
  if (weight == NormWeight::kFinal) return weights_.norm.data();
  const LlamaLayerWeights& l = weights_.layers[static_cast<std::size_t>(layer)];
  switch (weight) {
    case NormWeight::kInput: return l.input_layernorm.data();
    case NormWeight::kPostAttention: return l.post_attention_layernorm.data();
    case NormWeight::kQ: return l.q_norm.data();
    case NormWeight::kK: return l.k_norm.data();
    case NormWeight::kPreFeedforward: return l.pre_feedforward_layernorm.data();
    case NormWeight::kPostFeedforward: return l.post_feedforward_layernorm.data();
    case NormWeight::kFinal: break;
  }
  return weights_.norm.data();
}

Status CpuDecoderOps::embed() {
  cpu::embedding(weights_.embed_tokens, batch_->token_ids.data(), batch_->num_tokens(),
                 a_.residual.data());
  return Status::ok_status();
}

Status CpuDecoderOps::rms_norm(std::int64_t layer, NormWeight weight) {
  cpu::rms_norm(a_.residual.data(), norm_weight(layer, weight),
                static_cast<float>(config_.rms_norm_eps), batch_->num_tokens(), config_.hidden_size,
                a_.normed.data());
  return Status::ok_status();
}

// The row-wise ops between the matmuls (norms, RoPE, SiLU) are cheap per row, but on the calling
// thread alone they leave the other threads idle ~10% of a batched decode step, so they are
// spread over the pool by rows. Each row is computed by itself whatever the split, so a row's
// bits do not depend on the batch.
Status CpuDecoderOps::add_rms_norm(std::int64_t layer, NormWeight weight) {
  const std::int64_t hidden = config_.hidden_size;
  const float* w = norm_weight(layer, weight);
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  pool_->parallel_for(batch_->num_tokens(), [&](std::int64_t begin, std::int64_t end) {
    cpu::add_rms_norm(a_.residual.data() + begin * hidden, a_.out.data() + begin * hidden, w, eps,
                      end - begin, hidden, a_.normed.data() + begin * hidden);
  });
  return Status::ok_status();
}

Status CpuDecoderOps::qkv_projection(std::int64_t layer) {
  const LlamaLayerWeights& l = weights_.layers[static_cast<std::size_t>(layer)];
  // One pool dispatch for the three projections of the same x.
  const std::array<cpu::MatmulOutput, 3> qkv = {{
      {.w = l.q_proj, .bias = bias_or_null(l.q_bias), .y = a_.q.data()},
      {.w = l.k_proj, .bias = bias_or_null(l.k_bias), .y = a_.k.data()},
      {.w = l.v_proj, .bias = bias_or_null(l.v_bias), .y = a_.v.data()},
  }};
  cpu::matmul_fused(*pool_, a_.normed.data(), batch_->num_tokens(), qkv);
  return Status::ok_status();
}

// Each head's head_dim values are one RMSNorm row: q is [n * heads, head_dim], k likewise.
Status CpuDecoderOps::head_rms_norm(std::int64_t layer) {
  const LlamaLayerWeights& l = weights_.layers[static_cast<std::size_t>(layer)];
  if (l.q_norm.empty() || l.k_norm.empty()) {
    return Status(StatusCode::kFailedPrecondition, "head_rms_norm: the model has no q/k norms");
  }
  const std::int64_t d = config_.head_dim;
  const std::int64_t heads = config_.num_attention_heads;
  const std::int64_t kv_heads = config_.num_key_value_heads;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  pool_->parallel_for(batch_->num_tokens(), [&](std::int64_t begin, std::int64_t end) {
    float* q = a_.q.data() + begin * heads * d;
    float* k = a_.k.data() + begin * kv_heads * d;
    cpu::rms_norm(q, l.q_norm.data(), eps, (end - begin) * heads, d, q);
    cpu::rms_norm(k, l.k_norm.data(), eps, (end - begin) * kv_heads, d, k);
  });
  return Status::ok_status();
}

Status CpuDecoderOps::rope_and_cache_write(std::int64_t layer, RopeTable table) {
  const std::vector<float>& inv_freq =
      table == RopeTable::kLocal ? weights_.rope_local_inv_freq : weights_.rope_inv_freq;
  if (inv_freq.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "rope_and_cache_write: the config has no local RoPE base");
  }
  const ForwardBatch& batch = *batch_;
  const cpu::KvCacheView& cache = kv_cache_[static_cast<std::size_t>(layer)];
  const std::int64_t* slots = slot_mapping(layer);
  const std::int64_t q_row = config_.num_attention_heads * config_.head_dim;
  const std::int64_t kv_row = config_.num_key_value_heads * config_.head_dim;
  pool_->parallel_for(batch.num_tokens(), [&](std::int64_t begin, std::int64_t end) {
    cpu::apply_rope(inv_freq.data(), weights_.rope_style, batch.positions.data() + begin,
                    end - begin, a_.q.data() + begin * q_row, config_.num_attention_heads,
                    a_.k.data() + begin * kv_row, config_.num_key_value_heads, config_.head_dim);
    cpu::write_kv(a_.k.data() + begin * kv_row, a_.v.data() + begin * kv_row, slots + begin,
                  end - begin, cache);
  });
  return Status::ok_status();
}

// Plain causal attention (the default scale, or one equal to it, as Gemma 3 270M's
// query_pre_attn_scalar = head_dim gives) runs paged_attention's tiles; a window, another scale
// or a soft-cap runs windowed_attention.
Status CpuDecoderOps::attention(std::int64_t layer, const AttentionOptions& options) {
  const ForwardBatch& batch = *batch_;
  const cpu::AttentionBatch attention_batch{
      .query_start_loc = batch.query_start_loc.data(),
      .seq_lens = batch.seq_lens.data(),
      .block_tables = block_tables(layer),
      .num_seqs = batch.num_seqs(),
      .max_blocks_per_seq = batch.max_blocks_per_seq,
  };
  const auto default_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(config_.head_dim)));
  const bool plain = (options.softmax_scale == 0.0f || options.softmax_scale == default_scale) &&
                     options.sliding_window == 0 && options.logit_softcap == 0.0f;
  if (!plain) {
    cpu::windowed_attention(*pool_, a_.q.data(), config_.num_attention_heads,
                            kv_cache_[static_cast<std::size_t>(layer)], attention_batch,
                            {.scale = options.softmax_scale,
                             .sliding_window = options.sliding_window,
                             .logit_softcap = options.logit_softcap},
                            a_.attn.data());
    return Status::ok_status();
  }
  cpu::paged_attention(*pool_, a_.q.data(), config_.num_attention_heads,
                       kv_cache_[static_cast<std::size_t>(layer)], attention_batch, a_.attn.data());
  return Status::ok_status();
}

Status CpuDecoderOps::output_projection(std::int64_t layer) {
  cpu::matmul(*pool_, a_.attn.data(), batch_->num_tokens(),
              weights_.layers[static_cast<std::size_t>(layer)].o_proj, nullptr, a_.out.data());
  return Status::ok_status();
}

Status CpuDecoderOps::gated_mlp(std::int64_t layer, GatedActivation activation) {
  const LlamaLayerWeights& l = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t n = batch_->num_tokens();
  const std::array<cpu::MatmulOutput, 2> gate_up = {{
      {.w = l.gate_proj, .bias = nullptr, .y = a_.gate.data()},
      {.w = l.up_proj, .bias = nullptr, .y = a_.up.data()},
  }};
  cpu::matmul_fused(*pool_, a_.normed.data(), n, gate_up);
  const std::int64_t width = config_.intermediate_size;
  pool_->parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      if (activation == GatedActivation::kSilu) {
        cpu::silu_mul(a_.gate.data() + r * width, a_.up.data() + r * width, width,
                      a_.act.data() + r * width);
      } else {
        cpu::gelu_tanh_mul(a_.gate.data() + r * width, a_.up.data() + r * width, width,
                           a_.act.data() + r * width);
      }
    }
  });
  cpu::matmul(*pool_, a_.act.data(), n, l.down_proj, nullptr, a_.out.data());
  return Status::ok_status();
}

Status CpuDecoderOps::embed_scaled(float scale) {
  PAGODA_RETURN_IF_ERROR(embed());
  const std::int64_t hidden = config_.hidden_size;
  pool_->parallel_for(batch_->num_tokens(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin * hidden; i < end * hidden; ++i) a_.residual[i] *= scale;
  });
  return Status::ok_status();
}

// Row by row: the sublayer output normed in place, then the fused add + norm.
Status CpuDecoderOps::post_norm_add_rms_norm(std::int64_t layer, NormWeight post,
                                             std::int64_t next_layer, NormWeight next) {
  const std::int64_t hidden = config_.hidden_size;
  if (weights_.layers.front().post_feedforward_layernorm.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "post_norm_add_rms_norm: the model has no sandwich norms");
  }
  const float* w_post = norm_weight(layer, post);
  const float* w_next = norm_weight(next_layer, next);
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  pool_->parallel_for(batch_->num_tokens(), [&](std::int64_t begin, std::int64_t end) {
    float* out = a_.out.data() + begin * hidden;
    cpu::rms_norm(out, w_post, eps, end - begin, hidden, out);
    cpu::add_rms_norm(a_.residual.data() + begin * hidden, out, w_next, eps, end - begin, hidden,
                      a_.normed.data() + begin * hidden);
  });
  return Status::ok_status();
}

// Only the rows the caller samples from go through the LM head (usually one per sequence).
void CpuDecoderOps::lm_head(float* logits) {
  const std::int64_t hidden = config_.hidden_size;
  const std::int64_t num_logits = batch_->num_logits();
  const auto row_bytes = static_cast<std::size_t>(hidden) * sizeof(float);
  for (std::int64_t r = 0; r < num_logits; ++r) {
    std::memcpy(a_.last.data() + r * hidden, a_.normed.data() + batch_->logits_indices[r] * hidden,
                row_bytes);
  }
  cpu::matmul(*pool_, a_.last.data(), num_logits, weights_.lm_head, nullptr, logits);
}

}  // namespace pagoda::models
