// The CUDA executor's decode graphs and overlapped steps on a small random model: graph replay
// against the same executor built with enforce_eager, and launch_step / collect_step against
// execute() fed the host's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "models/cuda_model_executor.h"
#include "sampling/sampler.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/random_llama.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::make_batch;
using gpu_test::make_model;
using gpu_test::SequenceState;

// ---- CUDA graphs ------------------------------------------------------------------------

// Decode steps replayed from the captured graphs against the same executor built with
// enforce_eager, on the same weights and schedule: bit for bit where the batch fills its graph
// (the same kernels, GEMM shapes and split plan), within FP32/BF16 noise where the graph pads the
// batch (cuBLASLt may pick another algorithm for the padded M), and the same greedy token
// wherever the top two logits are clearly apart. Contexts up to ~700 tokens make the decode
// kernel split, so the graph's device-side partition size is exercised.
void graph_against_eager(ScalarType type) {
  const auto model = make_model(false, type, 11u);
  const ModelConfig& c = model->config;
  const std::int64_t block_size = 16, max_blocks = 48, num_seqs = 4;
  const models::CudaExecutorOptions options{.dtype = type,
                                            .max_num_batched_tokens = 768,
                                            .max_num_seqs = num_seqs,
                                            .max_model_len = max_blocks * block_size};
  auto eager_options = options;
  eager_options.enforce_eager = true;
  auto graphed = models::CudaModelExecutor::create_from_weights(c, model->weights, options);
  auto eager = models::CudaModelExecutor::create_from_weights(c, model->weights, eager_options);
  ASSERT_TRUE(graphed.ok()) << graphed.status().to_string();
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  const std::int64_t num_blocks = num_seqs * max_blocks;
  ASSERT_TRUE((*graphed)->allocate_kv_cache(num_blocks, block_size).ok());
  ASSERT_TRUE((*eager)->allocate_kv_cache(num_blocks, block_size).ok());
  // Sizes 1, 2 and 4 (the max_num_seqs), none with enforce_eager.
  EXPECT_EQ((*graphed)->decode_graph_stats().count, 3);
  EXPECT_EQ((*graphed)->decode_graph_stats().max_num_seqs, num_seqs);
  EXPECT_EQ((*eager)->decode_graph_stats().count, 0);

  std::mt19937 rng(5);
  std::vector<SequenceState> seqs(num_seqs);
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    for (std::int64_t j = 0; j < max_blocks; ++j)
      seqs[s].blocks.push_back(static_cast<std::int32_t>(j * num_seqs + s));  // interleaved
  }
  const std::vector<int> prompt_lens = {700, 5, 300, 61};
  std::vector<std::int32_t> next(num_seqs);
  for (std::int64_t s = 0; s < num_seqs; ++s) {  // one prefill per sequence, eager on both
    std::vector<std::vector<std::int32_t>> tokens(num_seqs);
    for (int i = 0; i < prompt_lens[s]; ++i)
      tokens[s].push_back(static_cast<std::int32_t>(rng() % c.vocab_size));
    std::vector<SequenceState> copy = seqs;
    const ForwardBatch batch = make_batch(seqs, tokens, block_size, max_blocks);
    const ForwardBatch same = make_batch(copy, tokens, block_size, max_blocks);
    std::vector<float> a(c.vocab_size), b(c.vocab_size);
    ASSERT_TRUE((*graphed)->forward(batch, a.data()).ok());
    ASSERT_TRUE((*eager)->forward(same, b.data()).ok());
    next[s] = sampling::argmax(std::span<const float>(b));
  }
  // Which sequences decode at each step: all four (fills the size-4 graph), three (padded to
  // 4), one (size 1), two (size 2).
  const std::vector<std::vector<int>> steps = {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 2, 3},
                                               {1},          {0, 3},       {0, 1, 2, 3}};
  const double tolerance = type == ScalarType::kF32 ? 1e-5 : 2e-2;
  for (std::size_t step = 0; step < steps.size(); ++step) {
    std::vector<std::vector<std::int32_t>> tokens(num_seqs);
    for (const int s : steps[step]) tokens[s] = {next[s]};
    std::vector<SequenceState> copy = seqs;
    const ForwardBatch batch = make_batch(seqs, tokens, block_size, max_blocks);
    const ForwardBatch same = make_batch(copy, tokens, block_size, max_blocks);
    const auto rows = static_cast<std::size_t>(batch.num_logits());
    std::vector<float> got(rows * c.vocab_size, NAN), want(rows * c.vocab_size, NAN);
    ASSERT_TRUE((*graphed)->forward(batch, got.data()).ok());
    ASSERT_TRUE((*eager)->forward(same, want.data()).ok());
    const bool fills_graph = rows == 1 || rows == 2 || rows == 4;
    const std::string what = std::string(gpu_test::name_of(type)) + " step " +
                             std::to_string(step) + " with " + std::to_string(rows) + " rows";
    if (fills_graph) {
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << what << ": graph replay differs from eager";
    } else {
      gpu_test::expect_close(got, want, tolerance, what);
    }
    for (std::size_t r = 0; r < rows; ++r) {
      const std::span<const float> w(want.data() + r * c.vocab_size, c.vocab_size);
      const std::span<const float> g(got.data() + r * c.vocab_size, c.vocab_size);
      std::vector<float> sorted(w.begin(), w.end());
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      double max_diff = 0.0;
      for (std::size_t i = 0; i < w.size(); ++i)
        max_diff = std::max<double>(max_diff, std::abs(w[i] - g[i]));
      if (sorted[0] - sorted[1] > 4.0 * max_diff) {
        EXPECT_EQ(sampling::argmax(g), sampling::argmax(w)) << what << " row " << r;
      }
      next[steps[step][r]] = sampling::argmax(w);
    }
  }
}

TEST(GpuCudaModelExecutor, GraphReplayMatchesEagerFp32) {
  PAGODA_SKIP_WITHOUT_GPU();
  graph_against_eager(ScalarType::kF32);
}

TEST(GpuCudaModelExecutor, GraphReplayMatchesEagerBf16) {
  PAGODA_SKIP_WITHOUT_GPU();
  graph_against_eager(ScalarType::kBF16);
}

// Overlapped steps: step N+1 launched (its inputs named by from_previous_step, taken from step
// N's samples on the device) before step N is collected gives, step for step, the tokens of
// execute() fed the host's tokens, for greedy and seeded sampled rows with penalties (the
// device's penalty counts must see every sampled token in order), through graphs and eager.
TEST(GpuCudaModelExecutor, OverlappedStepsMatchExecute) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto model = make_model(false, ScalarType::kBF16, 13u);
  const ModelConfig& c = model->config;
  const std::int64_t block_size = 16, max_blocks = 8, num_seqs = 3;
  const models::CudaExecutorOptions options{.dtype = ScalarType::kBF16,
                                            .max_num_batched_tokens = 128,
                                            .max_num_seqs = 4,
                                            .max_model_len = max_blocks * block_size};
  auto a = models::CudaModelExecutor::create_from_weights(c, model->weights, options);
  auto b = models::CudaModelExecutor::create_from_weights(c, model->weights, options);
  ASSERT_TRUE(a.ok() && b.ok());
  for (auto* e : {&*a, &*b}) {
    ASSERT_TRUE((*e)->allocate_kv_cache(num_seqs * max_blocks, block_size).ok());
    SlotSamplingConfig penalized;
    penalized.presence_penalty = 0.5f;
    penalized.repetition_penalty = 1.2f;
    for (std::int32_t slot = 0; slot < num_seqs; ++slot) {
      ASSERT_TRUE(
          (*e)->open_sampling_slot(slot, slot == 1 ? penalized : SlotSamplingConfig{}).ok());
    }
  }
  const auto rows_for = [&](int step, std::size_t n) {
    SamplingBatch sampling;
    for (std::size_t s = 0; s < n; ++s) {
      sampling.rows.push_back({.slot = static_cast<std::int32_t>(s),
                               .temperature = s == 0 ? 0.0f : 0.8f,
                               .top_k = s == 2 ? 20 : 0,
                               .seed = 100 + s,
                               .position = step,
                               .num_logprobs = 3});
    }
    return sampling;
  };
  // The logprobs too: a random model's tokens barely depend on its attention, so only the
  // distribution shows a step run on another step's positions or cache slots.
  const auto logprobs_of = [](const StepOutput& out) {
    std::vector<std::vector<std::pair<std::int32_t, float>>> all;
    for (const SampledLogprobs& l : out.logprobs) {
      all.push_back(l.top);
      all.back().emplace_back(l.token_id, l.logprob);
    }
    return all;
  };
  std::vector<SequenceState> seqs_a(num_seqs), seqs_b(num_seqs);
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    for (std::int64_t j = 0; j < max_blocks; ++j)
      seqs_a[s].blocks.push_back(static_cast<std::int32_t>(s * max_blocks + j));
  }
  seqs_b = seqs_a;
  std::mt19937 rng(21);
  std::vector<std::vector<std::int32_t>> prompts(num_seqs);
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    prompts[s].resize(5 + 7 * s);
    for (auto& t : prompts[s]) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  }
  // Step 0: the prompts, through execute() on both.
  StepOutput out_a, out_b;
  ASSERT_TRUE(
      (*a)->execute(make_batch(seqs_a, prompts, block_size, max_blocks), rows_for(0, 3), out_a)
          .ok());
  ASSERT_TRUE(
      (*b)->execute(make_batch(seqs_b, prompts, block_size, max_blocks), rows_for(0, 3), out_b)
          .ok());
  ASSERT_EQ(out_a.token_ids, out_b.token_ids);
  const int steps = 8;
  std::vector<std::vector<std::int32_t>> want(steps + 1), got(steps + 1);
  std::vector<std::vector<std::vector<std::pair<std::int32_t, float>>>> want_logprobs(steps + 1),
      got_logprobs(steps + 1);
  want[0] = out_a.token_ids;
  got[0] = out_b.token_ids;
  want_logprobs[0] = logprobs_of(out_a);
  got_logprobs[0] = logprobs_of(out_b);
  // A: one step at a time, fed its own tokens.
  for (int step = 1; step <= steps; ++step) {
    std::vector<std::vector<std::int32_t>> tokens(num_seqs);
    for (std::int64_t s = 0; s < num_seqs; ++s) tokens[s] = {want[step - 1][s]};
    ASSERT_TRUE(
        (*a)->execute(make_batch(seqs_a, tokens, block_size, max_blocks), rows_for(step, 3), out_a)
            .ok());
    want[step] = out_a.token_ids;
    want_logprobs[step] = logprobs_of(out_a);
  }
  // B: launch step N+1 before collecting step N; its inputs are in flight.
  const auto launch = [&](int step) {
    std::vector<std::vector<std::int32_t>> tokens(num_seqs, {ForwardBatch::kTokenInFlight});
    ForwardBatch batch = make_batch(seqs_b, tokens, block_size, max_blocks);
    for (std::int32_t s = 0; s < num_seqs; ++s) batch.from_previous_step.push_back({s, s});
    const Status st = (*b)->launch_step(batch, rows_for(step, 3));
    EXPECT_TRUE(st.ok()) << "step " << step << ": " << st.to_string();
  };
  launch(1);
  for (int step = 2; step <= steps; ++step) {
    launch(step);
    ASSERT_TRUE((*b)->collect_step(out_b).ok());
    got[step - 1] = out_b.token_ids;
    got_logprobs[step - 1] = logprobs_of(out_b);
  }
  ASSERT_TRUE((*b)->collect_step(out_b).ok());
  got[steps] = out_b.token_ids;
  got_logprobs[steps] = logprobs_of(out_b);
  EXPECT_EQ((*b)->collect_step(out_b).code(), StatusCode::kFailedPrecondition);
  for (int step = 0; step <= steps; ++step) {
    EXPECT_EQ(got[step], want[step]) << "step " << step;
    // The same kernels on the same inputs: the same bits.
    EXPECT_EQ(got_logprobs[step], want_logprobs[step]) << "step " << step;
  }
  // A previous row past the previous step's rows is refused before anything runs.
  std::vector<std::vector<std::int32_t>> tokens(num_seqs, {ForwardBatch::kTokenInFlight});
  ForwardBatch bad = make_batch(seqs_b, tokens, block_size, max_blocks);
  bad.from_previous_step.push_back({0, 3});
  EXPECT_EQ((*b)->launch_step(bad, rows_for(steps + 1, 3)).code(), StatusCode::kInvalidArgument);
}

TEST(GpuCudaModelExecutor, GraphSizesPadLikeVllm) {
  using models::CudaModelExecutor;
  EXPECT_EQ(CudaModelExecutor::decode_graph_sizes(1), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(CudaModelExecutor::decode_graph_sizes(3), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(CudaModelExecutor::decode_graph_sizes(20),
            (std::vector<std::int64_t>{1, 2, 4, 8, 16, 20}));
  const auto sizes = CudaModelExecutor::decode_graph_sizes(256);
  EXPECT_EQ(sizes.size(), 35u);
  EXPECT_EQ(sizes.back(), 256);
}

}  // namespace
}  // namespace pagoda
