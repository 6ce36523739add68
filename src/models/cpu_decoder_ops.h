// DecoderOps on the CPU: the weights as the file stores them (q/k/v and gate/up as separate
// matrices, multiplied in one pool dispatch by matmul_fused), fp32 activations allocated once,
// and the fused row kernels of src/backend/cpu.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/thread_pool.h"
#include "models/decoder_ops.h"
#include "models/llama_weights.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_config.h"

namespace pagoda::models {

/// Scratch activations for up to `max_tokens` tokens, allocated once so a step allocates nothing.
struct CpuActivations {
  CpuActivations(const ModelConfig& config, std::int64_t max_tokens);

  std::vector<float> residual;  ///< [max_tokens, hidden], the skip stream
  std::vector<float> normed;    ///< [max_tokens, hidden], input of the next sublayer
  std::vector<float> q;         ///< [max_tokens, num_heads, head_dim]
  std::vector<float> k;         ///< [max_tokens, num_kv_heads, head_dim]
  std::vector<float> v;         ///< [max_tokens, num_kv_heads, head_dim]
  std::vector<float> attn;      ///< [max_tokens, num_heads, head_dim]
  std::vector<float> out;       ///< [max_tokens, hidden], a sublayer's output
  std::vector<float> gate;      ///< [max_tokens, intermediate]
  std::vector<float> up;        ///< [max_tokens, intermediate]
  std::vector<float> act;       ///< [max_tokens, intermediate], act(gate) * up
  std::vector<float> last;      ///< [max_tokens, hidden], final-normed rows that need logits
};

/// The CPU's op set over one loaded model.
class CpuDecoderOps final : public DecoderOps {
 public:
  CpuDecoderOps(const ModelConfig& config, LlamaWeights weights, std::int64_t max_tokens);

  /// The step the ops run on until the next bind(); `batch` (already validated) and
  /// `kv_cache` (one view per layer) must outlive it. `kv_group_of_layer` ([num_layers] or
  /// empty) picks each layer's block table and slot mapping when the batch has kv_groups.
  void bind(cpu::ThreadPool& pool, const ForwardBatch& batch,
            std::span<const cpu::KvCacheView> kv_cache,
            std::span<const std::int32_t> kv_group_of_layer = {});

  Status embed() override;
  Status rms_norm(std::int64_t layer, NormWeight weight) override;
  Status add_rms_norm(std::int64_t layer, NormWeight weight) override;
  Status qkv_projection(std::int64_t layer) override;
  Status head_rms_norm(std::int64_t layer) override;
  Status rope_and_cache_write(std::int64_t layer, RopeTable table) override;
  Status attention(std::int64_t layer, const AttentionOptions& options) override;
  Status output_projection(std::int64_t layer) override;
  Status gated_mlp(std::int64_t layer, GatedActivation activation) override;
  Status embed_scaled(float scale) override;
  Status post_norm_add_rms_norm(std::int64_t layer, NormWeight post, std::int64_t next_layer,
                                NormWeight next) override;

  /// logits = normed[logits_indices] lm_head^T, after the architecture's loop.
  void lm_head(float* logits /* [num_logits, vocab] */);

 private:
  const float* norm_weight(std::int64_t layer, NormWeight weight) const;

  ModelConfig config_;
  LlamaWeights weights_;
  CpuActivations a_;
  cpu::ThreadPool* pool_ = nullptr;
  const ForwardBatch* batch_ = nullptr;
  std::span<const cpu::KvCacheView> kv_cache_;
  std::span<const std::int32_t> kv_group_of_layer_;
  // The layer's KV group's tables: group 0's in the batch's own fields, the others' in kv_groups.
  const std::int64_t* slot_mapping(std::int64_t layer) const;
  const std::int32_t* block_tables(std::int64_t layer) const;
  std::int32_t kv_group(std::int64_t layer) const;
};

}  // namespace pagoda::models
