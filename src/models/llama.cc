#include "models/llama.h"

#include <array>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/rope.h"

namespace pagoda::models {

namespace {

std::vector<float> buffer(std::int64_t rows, std::int64_t cols) {
  return std::vector<float>(static_cast<std::size_t>(rows * cols));
}

const float* bias_or_null(const std::vector<float>& bias) {
  return bias.empty() ? nullptr : bias.data();
}

// The row-wise ops between the matmuls (norms, RoPE, SiLU) are cheap per row, but on the calling
// thread alone they leave the other threads idle ~10% of a batched decode step, so they are
// spread over the pool by rows. Each row is computed by itself whatever the split, so a row's
// bits do not depend on the batch.
void add_rms_norm(cpu::ThreadPool& pool, float* residual, const float* x, const float* weight,
                  float eps, std::int64_t n, std::int64_t hidden, float* out) {
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    cpu::add_rms_norm(residual + begin * hidden, x + begin * hidden, weight, eps, end - begin,
                      hidden, out + begin * hidden);
  });
}

}  // namespace

LlamaActivations::LlamaActivations(const ModelConfig& c, std::int64_t max_tokens)
    : max_tokens(max_tokens),
      residual(buffer(max_tokens, c.hidden_size)),
      normed(buffer(max_tokens, c.hidden_size)),
      q(buffer(max_tokens, c.num_attention_heads * c.head_dim)),
      k(buffer(max_tokens, c.num_key_value_heads * c.head_dim)),
      v(buffer(max_tokens, c.num_key_value_heads * c.head_dim)),
      attn(buffer(max_tokens, c.num_attention_heads * c.head_dim)),
      proj(buffer(max_tokens, c.hidden_size)),
      gate(buffer(max_tokens, c.intermediate_size)),
      up(buffer(max_tokens, c.intermediate_size)),
      act(buffer(max_tokens, c.intermediate_size)),
      last(buffer(max_tokens, c.hidden_size)) {}

LlamaModel::LlamaModel(const ModelConfig& config, LlamaWeights weights)
    : config_(config), weights_(std::move(weights)) {}

// x -> [RMSNorm -> attention -> +] -> [RMSNorm -> MLP -> +] -> ... -> RMSNorm -> lm_head.
// Each residual add is fused with the norm that follows it (add_rms_norm), so `normed` always
// holds the next sublayer's input and `residual` the running sum.
void LlamaModel::forward(cpu::ThreadPool& pool, const ForwardBatch& batch,
                         std::span<const cpu::KvCacheView> kv_cache, LlamaActivations& a,
                         float* logits) const {
  const std::int64_t n = batch.num_tokens();
  const std::int64_t hidden = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);

  cpu::embedding(weights_.embed_tokens, batch.token_ids.data(), n, a.residual.data());
  cpu::rms_norm(a.residual.data(), weights_.layers[0].input_layernorm.data(), eps, n, hidden,
                a.normed.data());
  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const LlamaLayerWeights& layer = weights_.layers[i];
    attention(pool, layer, batch, kv_cache[i], a);
    add_rms_norm(pool, a.residual.data(), a.proj.data(), layer.post_attention_layernorm.data(), eps,
                 n, hidden, a.normed.data());
    mlp(pool, layer, n, a);
    const bool last_layer = i + 1 == weights_.layers.size();
    const float* next_norm =
        last_layer ? weights_.norm.data() : weights_.layers[i + 1].input_layernorm.data();
    add_rms_norm(pool, a.residual.data(), a.proj.data(), next_norm, eps, n, hidden,
                 a.normed.data());
  }

  // Only the rows the caller samples from go through the LM head (usually one per sequence).
  const std::int64_t num_logits = batch.num_logits();
  const auto row_bytes = static_cast<std::size_t>(hidden) * sizeof(float);
  for (std::int64_t r = 0; r < num_logits; ++r) {
    std::memcpy(a.last.data() + r * hidden, a.normed.data() + batch.logits_indices[r] * hidden,
                row_bytes);
  }
  cpu::matmul(pool, a.last.data(), num_logits, weights_.lm_head, nullptr, logits);
}

// q, k, v = x Wq (+bq), x Wk (+bk), x Wv (+bv); RoPE(q, k); cache (k, v);
// attn = softmax(q K^T / sqrt(d), causal) V over the cached context; out = attn Wo.
void LlamaModel::attention(cpu::ThreadPool& pool, const LlamaLayerWeights& layer,
                           const ForwardBatch& batch, const cpu::KvCacheView& kv_cache,
                           LlamaActivations& a) const {
  const std::int64_t n = batch.num_tokens();
  const float* x = a.normed.data();
  // One pool dispatch for the three projections of the same x.
  const std::array<cpu::MatmulOutput, 3> qkv = {{
      {.w = layer.q_proj, .bias = bias_or_null(layer.q_bias), .y = a.q.data()},
      {.w = layer.k_proj, .bias = bias_or_null(layer.k_bias), .y = a.k.data()},
      {.w = layer.v_proj, .bias = bias_or_null(layer.v_bias), .y = a.v.data()},
  }};
  cpu::matmul_fused(pool, x, n, qkv);
  const std::int64_t q_row = config_.num_attention_heads * config_.head_dim;
  const std::int64_t kv_row = config_.num_key_value_heads * config_.head_dim;
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    cpu::apply_rope(weights_.rope_inv_freq.data(), weights_.rope_style,
                    batch.positions.data() + begin, end - begin, a.q.data() + begin * q_row,
                    config_.num_attention_heads, a.k.data() + begin * kv_row,
                    config_.num_key_value_heads, config_.head_dim);
    cpu::write_kv(a.k.data() + begin * kv_row, a.v.data() + begin * kv_row,
                  batch.slot_mapping.data() + begin, end - begin, kv_cache);
  });
  const cpu::AttentionBatch attention_batch{
      .query_start_loc = batch.query_start_loc.data(),
      .seq_lens = batch.seq_lens.data(),
      .block_tables = batch.block_tables.data(),
      .num_seqs = batch.num_seqs(),
      .max_blocks_per_seq = batch.max_blocks_per_seq,
  };
  cpu::paged_attention(pool, a.q.data(), config_.num_attention_heads, kv_cache, attention_batch,
                       a.attn.data());
  cpu::matmul(pool, a.attn.data(), n, layer.o_proj, nullptr, a.proj.data());
}

// out = down(silu(gate(x)) * up(x)).
void LlamaModel::mlp(cpu::ThreadPool& pool, const LlamaLayerWeights& layer, std::int64_t n,
                     LlamaActivations& a) const {
  const float* x = a.normed.data();
  const std::array<cpu::MatmulOutput, 2> gate_up = {{
      {.w = layer.gate_proj, .bias = nullptr, .y = a.gate.data()},
      {.w = layer.up_proj, .bias = nullptr, .y = a.up.data()},
  }};
  cpu::matmul_fused(pool, x, n, gate_up);
  const std::int64_t width = config_.intermediate_size;
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      cpu::silu_mul(a.gate.data() + r * width, a.up.data() + r * width, width,
                    a.act.data() + r * width);
    }
  });
  cpu::matmul(pool, a.act.data(), n, layer.down_proj, nullptr, a.proj.data());
}

}  // namespace pagoda::models
