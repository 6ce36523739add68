// The CUDA executor against the CPU op set on the same host weights: one schedule of mixed
// steps (chunked prefill beside a decode, which the executor splits between the prefill and
// decode kernels, then pure decode steps that replay the decode CUDA graphs), both sides fed the
// CPU's greedy tokens. Shared by the dense and the quantized
// executor tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/thread_pool.h"
#include "models/architecture.h"
#include "models/cpu_decoder_ops.h"
#include "models/cuda_model_executor.h"
#include "sampling/sampler.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/random_llama.h"

namespace pagoda::gpu_test {

// Runs the same schedule on the CPU op set and the CUDA executor over `weights` and checks each
// step's logits within `tolerance` (relative L2 of the step's logits), the argmax wherever it is
// clear of the difference (always at FP32); `summary` receives the executor's weights_summary().
inline void run_against_cpu(const ModelConfig& c, const models::LlamaWeights& weights,
                            ScalarType type, double tolerance, const std::string& label,
                            std::string* summary = nullptr) {
  const std::int64_t block_size = 16;
  const std::int64_t num_blocks = 24;
  const std::int64_t max_blocks = 8;
  const std::int64_t max_tokens = 64;

  auto architecture = models::architecture_of(c);
  ASSERT_TRUE(architecture.ok()) << architecture.status().to_string();
  models::CpuDecoderOps cpu_ops(c, weights, max_tokens);
  cpu::ThreadPool pool(2);
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

  auto gpu = models::CudaModelExecutor::create_from_weights(c, weights,
                                                            {.dtype = type,
                                                             .max_num_batched_tokens = max_tokens,
                                                             .max_num_seqs = 4,
                                                             .max_model_len = 128});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  ASSERT_TRUE((*gpu)->allocate_kv_cache(num_blocks, block_size).ok());
  if (summary != nullptr) *summary = (*gpu)->weights_summary();

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
  std::vector<std::int32_t> next(2, -1);
  const std::int64_t mixed_before = (*gpu)->attention_path_counts().mixed;
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
    cpu_ops.bind(pool, batch, views);
    ASSERT_TRUE((*architecture)->forward(cpu_ops, c).ok());
    cpu_ops.lm_head(want.data());
    const Status s = (*gpu)->forward(same, got.data());
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::string what =
        label + " " + gpu_test::name_of(type) + " step " + std::to_string(step);
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
  // Step 1 (A's chunk beside B's decode) split between the prefill and the decode kernel.
  EXPECT_EQ((*gpu)->attention_path_counts().mixed - mixed_before, c.num_hidden_layers)
      << label << ": the mixed step did not take the split attention path";
}

}  // namespace pagoda::gpu_test
