// The whole model on the GPU against the CPU executor's LlamaModel on the same random weights:
// small Llama (GQA 2, tied embeddings) and Qwen2 (QKV bias, GQA 4) models with head_dim 64,
// driven through mixed prefill/decode steps: chunked prefill beside a decode, then pure decode
// steps (the split-K decode kernel). Both sides are fed the CPU's greedy tokens.
//
//   FP32: logits within 1e-4 relative L2 (fp32 sums in another order; no TF32) and the same argmax
//         at every step.
//   BF16: the CPU runs the bf16-rounded weights in fp32, so the difference is the GPU's bf16
//         activations: about one rounding (u = 2^-8) per op, ~20 ops deep -> <= 5e-2 relative L2;
//         the argmax must agree wherever the CPU's top two logits are further apart than 4x the
//         step's largest logit difference (vLLM's check_logprobs_close idea: a tie within noise
//         may flip).
#include "models/cuda_model_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <numeric>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/thread_pool.h"
#include "models/llama.h"
#include "sampling/sampler.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;

struct RandomModel {
  ModelConfig config;
  std::list<std::vector<float>> storage;  // stable addresses for the TensorViews
  models::LlamaWeights weights;
};

std::unique_ptr<RandomModel> make_model(bool qwen2, ScalarType weights_type, std::uint32_t seed) {
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

// One sequence's place in the paged cache: its blocks and how many tokens it has cached.
struct SequenceState {
  std::vector<std::int32_t> blocks;
  std::int32_t num_cached = 0;
};

// Appends `tokens` of each sequence (empty: not scheduled) to a batch; logits for each
// scheduled sequence's last token.
ForwardBatch make_batch(std::vector<SequenceState>& seqs,
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

// Runs the same schedule on the CPU model and the CUDA executor and checks each step's logits.
void run_against_cpu(bool qwen2, ScalarType type) {
  const auto model = make_model(qwen2, type, qwen2 ? 7u : 8u);
  const ModelConfig& c = model->config;
  const std::int64_t block_size = 16;
  const std::int64_t num_blocks = 24;
  const std::int64_t max_blocks = 8;
  const std::int64_t max_tokens = 64;

  models::LlamaModel cpu_model(c, model->weights);
  cpu::ThreadPool pool(2);
  models::LlamaActivations activations(c, max_tokens);
  const auto pool_floats =
      static_cast<std::size_t>(num_blocks * block_size * c.num_key_value_heads * c.head_dim);
  std::vector<std::vector<float>> cpu_kv(2 * c.num_hidden_layers, std::vector<float>(pool_floats));
  std::vector<cpu::KvCacheView> views;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    views.push_back({.k = cpu_kv[2 * l].data(),
                     .v = cpu_kv[2 * l + 1].data(),
                     .num_blocks = num_blocks,
                     .block_size = block_size,
                     .num_kv_heads = c.num_key_value_heads,
                     .head_dim = c.head_dim});
  }

  auto gpu = models::CudaModelExecutor::create_from_weights(c, model->weights,
                                                            {.dtype = type,
                                                             .max_num_batched_tokens = max_tokens,
                                                             .max_num_seqs = 4,
                                                             .max_model_len = 128});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  ASSERT_TRUE((*gpu)->allocate_kv_cache(num_blocks, block_size).ok());

  // Blocks handed out in shuffled order; the two sequences never share one.
  std::vector<std::int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(3);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<SequenceState> seqs(2);
  seqs[0].blocks.assign(ids.begin(), ids.begin() + max_blocks);
  seqs[1].blocks.assign(ids.begin() + max_blocks, ids.begin() + 2 * max_blocks);

  std::vector<std::int32_t> prompt_a(37), prompt_b(9);
  for (auto& t : prompt_a) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  for (auto& t : prompt_b) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  // Step 1: A's first chunk beside B's whole prompt. Step 2: A's second chunk beside B's first
  // decode. Then 12 decode steps of both.
  std::vector<std::vector<std::vector<std::int32_t>>> schedule = {
      {{prompt_a.begin(), prompt_a.begin() + 20}, prompt_b},
      {{prompt_a.begin() + 20, prompt_a.end()}, {}}};
  const double tolerance = type == ScalarType::kF32 ? 1e-4 : 5e-2;
  std::vector<std::int32_t> next(2, -1);
  for (int step = 0; step < 14; ++step) {
    std::vector<std::vector<std::int32_t>> tokens;
    if (step < 2) {
      tokens = schedule[step];
      if (step == 1) tokens[1] = {next[1]};
    } else {
      tokens = {{next[0]}, {next[1]}};
    }
    std::vector<SequenceState> gpu_seqs = seqs;
    const ForwardBatch batch = make_batch(seqs, tokens, block_size, max_blocks);
    const ForwardBatch same = make_batch(gpu_seqs, tokens, block_size, max_blocks);
    const auto rows = static_cast<std::size_t>(batch.num_logits());
    std::vector<float> want(rows * c.vocab_size), got(rows * c.vocab_size, NAN);
    cpu_model.forward(pool, batch, views, activations, want.data());
    const Status s = (*gpu)->forward(same, got.data());
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::string what = std::string(qwen2 ? "qwen2 " : "llama ") + gpu_test::name_of(type) +
                             " step " + std::to_string(step);
    gpu_test::expect_close(got, want, tolerance, what);

    // Which scheduled sequence each logits row belongs to.
    std::vector<std::size_t> owner;
    for (std::size_t s2 = 0; s2 < tokens.size(); ++s2) {
      if (!tokens[s2].empty()) owner.push_back(s2);
    }
    for (std::size_t r = 0; r < rows; ++r) {
      const std::span<const float> w(want.data() + r * c.vocab_size, c.vocab_size);
      const std::span<const float> g(got.data() + r * c.vocab_size, c.vocab_size);
      const std::int32_t cpu_token = sampling::argmax(w);
      std::vector<float> sorted(w.begin(), w.end());
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      double max_diff = 0.0;
      for (std::size_t i = 0; i < w.size(); ++i)
        max_diff = std::max<double>(max_diff, std::abs(w[i] - g[i]));
      const bool clear = type == ScalarType::kF32 || sorted[0] - sorted[1] > 4.0 * max_diff;
      if (clear) {
        EXPECT_EQ(sampling::argmax(g), cpu_token) << what << " row " << r;
      }
      // Only prompt-completing rows choose the next token (A's first chunk does not).
      const bool prompt_done = !(step == 0 && owner[r] == 0);
      if (prompt_done) next[owner[r]] = cpu_token;
    }
  }
}

TEST(GpuCudaModelExecutor, LlamaFp32MatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(false, ScalarType::kF32);
}

TEST(GpuCudaModelExecutor, Qwen2Fp32MatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(true, ScalarType::kF32);
}

TEST(GpuCudaModelExecutor, LlamaBf16MatchesCpuWithinBf16Noise) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(false, ScalarType::kBF16);
}

TEST(GpuCudaModelExecutor, Qwen2Bf16MatchesCpuWithinBf16Noise) {
  PAGODA_SKIP_WITHOUT_GPU();
  run_against_cpu(true, ScalarType::kBF16);
}

// The profiling pass leaves a positive block budget and the executor runs after it.
TEST(GpuCudaModelExecutor, ProfilingSizesTheKvCache) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto model = make_model(false, ScalarType::kF32, 9u);
  auto gpu = models::CudaModelExecutor::create_from_weights(
      model->config, model->weights,
      {.dtype = ScalarType::kBF16, .max_num_batched_tokens = 256, .max_model_len = 512});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  auto blocks = (*gpu)->profile_num_kv_blocks(0.5, 16);
  ASSERT_TRUE(blocks.ok()) << blocks.status().to_string();
  EXPECT_GT(*blocks, 0);
  // More memory allowed, more blocks.
  auto more = (*gpu)->profile_num_kv_blocks(0.9, 16);
  ASSERT_TRUE(more.ok());
  EXPECT_GT(*more, *blocks);
}

}  // namespace
}  // namespace pagoda
