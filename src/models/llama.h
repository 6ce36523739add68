// The Llama-family decoder (Llama 2/3, SmolLM2, Mistral, Qwen2/2.5) as a sequence of ops over a
// batch of tokens: pre-norm attention with RoPE and a paged KV cache, pre-norm SwiGLU MLP, final
// norm and the LM head on the rows that need logits only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/thread_pool.h"
#include "models/llama_weights.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_config.h"

namespace pagoda::models {

/// Scratch activations for up to `max_tokens` tokens, allocated once so a step allocates nothing.
struct LlamaActivations {
  LlamaActivations(const ModelConfig& config, std::int64_t max_tokens);

  std::int64_t max_tokens;
  std::vector<float> residual;  ///< [max_tokens, hidden], the skip stream
  std::vector<float> normed;    ///< [max_tokens, hidden], input of the next sublayer
  std::vector<float> q;         ///< [max_tokens, num_heads, head_dim]
  std::vector<float> k;         ///< [max_tokens, num_kv_heads, head_dim]
  std::vector<float> v;         ///< [max_tokens, num_kv_heads, head_dim]
  std::vector<float> attn;      ///< [max_tokens, num_heads, head_dim]
  std::vector<float> proj;      ///< [max_tokens, hidden], a sublayer's output
  std::vector<float> gate;      ///< [max_tokens, intermediate]
  std::vector<float> up;        ///< [max_tokens, intermediate]
  std::vector<float> act;       ///< [max_tokens, intermediate], silu(gate) * up
  std::vector<float> last;      ///< [max_tokens, hidden], final-normed rows that need logits
};

/// A loaded Llama-family model; forward() is const, all state is in the caller's buffers.
class LlamaModel {
 public:
  LlamaModel(const ModelConfig& config, LlamaWeights weights);

  /// Runs `batch` (already validated) through the model; `kv_cache` holds one view per layer.
  void forward(cpu::ThreadPool& pool, const ForwardBatch& batch,
               std::span<const cpu::KvCacheView> kv_cache, LlamaActivations& a,
               float* logits /* [num_logits, vocab] */) const;

 private:
  void attention(cpu::ThreadPool& pool, const LlamaLayerWeights& layer, const ForwardBatch& batch,
                 const cpu::KvCacheView& kv_cache, LlamaActivations& a) const;
  void mlp(cpu::ThreadPool& pool, const LlamaLayerWeights& layer, std::int64_t num_tokens,
           LlamaActivations& a) const;

  ModelConfig config_;
  LlamaWeights weights_;
};

}  // namespace pagoda::models
