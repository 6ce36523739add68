// Prompt logprobs (SamplingParams::prompt_logprobs) through the engine: for every prompt token
// after the first, the log-softmax of the logits at the position before it, with the top-N.
// The reference runs the whole prompt as one forward() on a fresh FakeModelExecutor (whose logits
// are a function of the cached sequence) and takes log-softmax in double; the engine must agree
// however the prompt is chunked (step token budget), with the prompt's prefix already in the
// prefix cache (a hit would skip positions), with penalties on (prompt rows must not count),
// in overlapped steps, and beside other traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/scheduler.h"
#include "engine_test_support.h"

namespace pagoda::engine {
namespace {

constexpr std::int64_t kBlockSize = 16;

// Log-softmax rows of the fake model at every position of `prompt`, [len][vocab].
std::vector<std::vector<double>> reference_logprobs(const std::vector<std::int32_t>& prompt) {
  FakeModelExecutor fake(259, 512, 512);  // the whole prompt in one call
  const auto len = static_cast<std::int64_t>(prompt.size());
  const std::int64_t blocks = (len + kBlockSize - 1) / kBlockSize;
  EXPECT_TRUE(fake.allocate_kv_cache(blocks, kBlockSize).ok());
  ForwardBatch b;
  b.max_blocks_per_seq = blocks;
  b.query_start_loc = {0, static_cast<std::int32_t>(len)};
  b.seq_lens = {static_cast<std::int32_t>(len)};
  for (std::int64_t i = 0; i < blocks; ++i) b.block_tables.push_back(static_cast<std::int32_t>(i));
  for (std::int64_t p = 0; p < len; ++p) {
    b.token_ids.push_back(prompt[static_cast<std::size_t>(p)]);
    b.positions.push_back(static_cast<std::int32_t>(p));
    b.slot_mapping.push_back(p);
    b.logits_indices.push_back(static_cast<std::int32_t>(p));
  }
  const std::int64_t vocab = fake.info().vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(len * vocab));
  EXPECT_TRUE(fake.forward(b, logits.data()).ok());
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(len));
  for (std::int64_t p = 0; p < len; ++p) {
    const float* l = logits.data() + p * vocab;
    const double m = *std::max_element(l, l + vocab);
    double sum = 0.0;
    for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(l[v] - m);
    for (std::int64_t v = 0; v < vocab; ++v) {
      rows[static_cast<std::size_t>(p)].push_back(l[v] - m - std::log(sum));
    }
  }
  return rows;
}

void expect_matches(const std::vector<std::int32_t>& prompt, const RequestOutput& out,
                    std::int64_t num_top) {
  const auto ref = reference_logprobs(prompt);
  ASSERT_EQ(out.prompt_logprobs.size(), prompt.size() - 1);
  for (std::size_t t = 1; t < prompt.size(); ++t) {
    const TokenLogprobs& e = out.prompt_logprobs[t - 1];
    const std::vector<double>& row = ref[t - 1];
    ASSERT_EQ(e.token_id, prompt[t]) << "token " << t;
    EXPECT_NEAR(e.logprob, row[static_cast<std::size_t>(prompt[t])], 1e-5) << "token " << t;
    std::int64_t better = 0;
    for (const double x : row) better += x > row[static_cast<std::size_t>(prompt[t])] ? 1 : 0;
    EXPECT_EQ(e.rank, 1 + better) << "token " << t;
    ASSERT_EQ(static_cast<std::int64_t>(e.top.size()), num_top);
    std::vector<std::int32_t> order(row.size());
    for (std::size_t v = 0; v < order.size(); ++v) order[v] = static_cast<std::int32_t>(v);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
    });
    for (std::size_t k = 0; k < e.top.size(); ++k) {
      EXPECT_NEAR(e.top[k].second, row[static_cast<std::size_t>(order[k])], 1e-5)
          << "token " << t << " alternative " << k;
    }
  }
}

struct Case {
  std::int64_t budget;
  bool async;
};

class EnginePromptLogprobsTest : public ::testing::TestWithParam<Case> {};

TEST_P(EnginePromptLogprobsTest, AgreesWithOneForwardOverThePrompt) {
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = GetParam().budget;
  config.async_scheduling = GetParam().async;
  Engine e = make_engine(config);
  for (const int len : {1, 2, 17, 37, 90}) {
    const std::vector<std::int32_t> prompt = prompt_of(len, len);
    // The same prompt first without scoring, so its full blocks are in the prefix cache.
    auto warm = e.client->submit(request(prompt, 2));
    ASSERT_TRUE(warm.ok());
    collect(**warm);
    EngineRequest r = request(prompt, 3);
    r.stream = false;  // one output, carrying everything
    r.sampling.prompt_logprobs = 4;
    r.sampling.repetition_penalty = 1.5;  // prompt rows must leave the penalty counts alone
    r.sampling.frequency_penalty = 1.0;
    // Beside another scoring request and a plain one, in the same steps.
    EngineRequest other = request(prompt_of(len + 100, 23), 4);
    other.stream = false;
    other.sampling.prompt_logprobs = 0;
    auto a = e.client->submit(r);
    auto b = e.client->submit(other);
    auto c = e.client->submit(request(prompt_of(len + 200, 30), 5));
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const Collected ca = collect(**a);
    const Collected cb = collect(**b);
    collect(**c);
    expect_matches(prompt, ca.finals.at(0).output, 4);
    expect_matches(prompt_of(len + 100, 23), cb.finals.at(0).output, 0);
    // Its tokens are those of the same request without prompt logprobs.
    EngineRequest plain = request(prompt, 3);
    plain.sampling.repetition_penalty = 1.5;
    plain.sampling.frequency_penalty = 1.0;
    auto p = e.client->submit(plain);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(collect(**p).tokens[0], ca.tokens.at(0)) << "prompt of " << len;
    EXPECT_EQ(ca.finals.at(0).output.usage.num_cached_prompt_tokens, 0)
        << "a scoring request must not start from cached blocks";
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, EnginePromptLogprobsTest,
                         ::testing::Values(Case{7, false}, Case{16, false}, Case{64, false},
                                           Case{13, true}, Case{64, true}));

TEST(EnginePromptLogprobsStreamTest, ComeWithTheFirstOutputOnly) {
  Engine e = make_engine();
  const std::vector<std::int32_t> prompt = prompt_of(3, 40);
  EngineRequest r = request(prompt, 5);
  r.stream = true;
  r.sampling.prompt_logprobs = 2;
  auto s = e.client->submit(r);
  ASSERT_TRUE(s.ok());
  int outputs = 0;
  while (true) {
    auto item = (*s)->next(std::chrono::seconds(30));
    if (!item.ok()) break;
    if (outputs++ == 0) {
      expect_matches(prompt, item->output, 2);
    } else {
      EXPECT_TRUE(item->output.prompt_logprobs.empty());
    }
  }
  EXPECT_GE(outputs, 2);
}

// A step runs at most Scheduler::kMaxScoredTokensPerStep scored prompt tokens (each adds a
// logits row), across requests, whatever the token budget; the answers stay the same.
TEST(EnginePromptLogprobsCapTest, ScoredRowsPerStepAreCapped) {
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 512;
  config.scheduler.max_model_len = 512;
  auto executor = std::make_unique<FakeModelExecutor>(259, 512, 512);
  FakeModelExecutor* fake = executor.get();
  config.cache.num_blocks = 256;
  config.eos_token_id = kEos;
  auto client = EngineClient::create(config, std::move(executor), make_byte_tokenizer());
  ASSERT_TRUE(client.ok());
  fake->hold(true);
  std::vector<std::vector<std::int32_t>> prompts = {prompt_of(1, 300), prompt_of(2, 200)};
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (const auto& p : prompts) {
    EngineRequest r = request(p, 2);
    r.stream = false;
    r.sampling.prompt_logprobs = 1;
    auto s = (*client)->submit(r);
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  fake->hold(false);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Collected c = collect(*streams[i]);
    expect_matches(prompts[i], c.finals.at(0).output, 1);
  }
  EXPECT_LE(fake->max_logits_rows(), Scheduler::kMaxScoredTokensPerStep + 2);
  EXPECT_GE(fake->max_logits_rows(), Scheduler::kMaxScoredTokensPerStep - 1);
}

}  // namespace
}  // namespace pagoda::engine
