// A small random Llama / Qwen2 model (2 layers, hidden 256, head_dim 64) in host memory, and
// the paged-cache bookkeeping of a few sequences, for the GPU executor tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <list>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cuda/scalar_type.h"
#include "models/llama_weights.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_config.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::gpu_test {

using cuda::ScalarType;

struct RandomModel {
  ModelConfig config;
  std::list<std::vector<float>> storage;              // stable addresses for the TensorViews
  std::list<std::vector<std::int32_t>> permutations;  // the views' input permutations
  models::LlamaWeights weights;
};

inline std::unique_ptr<RandomModel> make_model(bool qwen2, ScalarType weights_type,
                                               std::uint32_t seed) {
  auto m = std::make_unique<RandomModel>();
  ModelConfig& c = m->config;
  c.architecture = qwen2 ? "qwen2" : "llama";
  c.num_hidden_layers = 2;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_attention_heads = 4;
  c.num_key_value_heads = qwen2 ? 1 : 2;
  c.head_dim = 64;
  c.vocab_size = 512;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = qwen2 ? 1000000.0 : 10000.0;
  c.tie_word_embeddings = !qwen2;
  c.attention_bias = qwen2;
  std::mt19937 rng(seed);
  auto tensor = [&](std::int64_t rows, std::int64_t cols, float bound) {
    m->storage.push_back(gpu_test::round_to(
        gpu_test::random_vector(static_cast<std::size_t>(rows * cols), rng, -bound, bound),
        weights_type));
    return cpu::dense_view(m->storage.back().data(), DType::kF32, rows, cols);
  };
  auto vector = [&](std::int64_t n, float low, float high) {
    return gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(n), rng, low, high),
                              weights_type);
  };
  const std::int64_t q = c.num_attention_heads * c.head_dim;
  const std::int64_t kv = c.num_key_value_heads * c.head_dim;
  const float h_bound = 2.0f / std::sqrt(static_cast<float>(c.hidden_size));
  models::LlamaWeights& w = m->weights;
  w.embed_tokens = tensor(c.vocab_size, c.hidden_size, 1.0f);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    models::LlamaLayerWeights layer;
    layer.input_layernorm = vector(c.hidden_size, 0.8f, 1.2f);
    layer.q_proj = tensor(q, c.hidden_size, h_bound);
    layer.k_proj = tensor(kv, c.hidden_size, h_bound);
    layer.v_proj = tensor(kv, c.hidden_size, h_bound);
    if (qwen2) {
      layer.q_bias = vector(q, -0.2f, 0.2f);
      layer.k_bias = vector(kv, -0.2f, 0.2f);
      layer.v_bias = vector(kv, -0.2f, 0.2f);
    }
    layer.o_proj = tensor(c.hidden_size, q, 2.0f / std::sqrt(static_cast<float>(q)));
    layer.post_attention_layernorm = vector(c.hidden_size, 0.8f, 1.2f);
    layer.gate_proj = tensor(c.intermediate_size, c.hidden_size, h_bound);
    layer.up_proj = tensor(c.intermediate_size, c.hidden_size, h_bound);
    layer.down_proj = tensor(c.hidden_size, c.intermediate_size,
                             2.0f / std::sqrt(static_cast<float>(c.intermediate_size)));
    w.layers.push_back(std::move(layer));
  }
  w.norm = vector(c.hidden_size, 0.8f, 1.2f);
  w.lm_head = qwen2 ? tensor(c.vocab_size, c.hidden_size, h_bound) : w.embed_tokens;
  w.rope_style = qwen2 ? cpu::RopeStyle::kRotateHalf : cpu::RopeStyle::kAdjacentPairs;
  w.rope_inv_freq = cpu::rope_inv_freq(c.head_dim, c.rope_theta, cpu::RopeScaling{});
  return m;
}

// Gives every layer matrix a random input permutation, as a GPTQ act-order checkpoint's stored
// column order: the CPU gathers x through it, the GPU must put the columns back in input order.
inline void permute_inputs(RandomModel& m, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto permute = [&](cpu::TensorView& w) {
    std::vector<std::int32_t>& p =
        m.permutations.emplace_back(static_cast<std::size_t>(w.num_cols));
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    w.input_permutation = p.data();
  };
  for (models::LlamaLayerWeights& layer : m.weights.layers) {
    for (cpu::TensorView* w : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj,
                               &layer.gate_proj, &layer.up_proj, &layer.down_proj}) {
      permute(*w);
    }
  }
}

// One sequence's place in the paged cache: its blocks and how many tokens it has cached.
struct SequenceState {
  std::vector<std::int32_t> blocks;
  std::int32_t num_cached = 0;
};

// Appends `tokens` of each sequence (empty: not scheduled) to a batch; logits for each
// scheduled sequence's last token.
inline ForwardBatch make_batch(std::vector<SequenceState>& seqs,
                               const std::vector<std::vector<std::int32_t>>& tokens,
                               std::int64_t block_size, std::int64_t max_blocks) {
  ForwardBatch b;
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc.push_back(0);
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    if (tokens[s].empty()) continue;
    for (std::int32_t t : tokens[s]) {
      const std::int32_t p = seqs[s].num_cached++;
      b.token_ids.push_back(t);
      b.positions.push_back(p);
      b.slot_mapping.push_back(
          static_cast<std::int64_t>(seqs[s].blocks[p / block_size]) * block_size + p % block_size);
    }
    b.query_start_loc.push_back(static_cast<std::int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(seqs[s].num_cached);
    for (std::int64_t j = 0; j < max_blocks; ++j) b.block_tables.push_back(seqs[s].blocks[j]);
    b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
  }
  return b;
}

}  // namespace pagoda::gpu_test
