// Sampling through the executor (execute() with one SamplingRow per logits row): a seeded
// request draws the same tokens alone, inside batches of other requests and after preemption;
// unseeded requests draw from the server seed; slots are handed out densely and reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/slot_allocator.h"
#include "engine_test_support.h"

namespace pagoda::engine {
namespace {

EngineRequest seeded(std::vector<std::int32_t> prompt, std::int64_t max_tokens,
                     std::uint64_t seed) {
  EngineRequest r = request(std::move(prompt), max_tokens);
  r.sampling.temperature = 1.7;  // the fake's favourite is then far from certain
  r.sampling.top_p = 0.97;
  r.sampling.seed = seed;
  return r;
}

std::vector<std::int32_t> run_alone(const EngineRequest& r, EngineConfig config = {}) {
  Engine e = make_engine(config);
  auto stream = e.client->submit(r);
  EXPECT_TRUE(stream.ok());
  return collect(**stream).tokens[0];
}

// Other traffic with every kind of sampling setting, so the target's rows share steps with
// greedy, penalized, biased, top-k and logprob rows.
EngineRequest neighbour(std::mt19937_64& rng, int i) {
  EngineRequest r = request(prompt_of(200 + i, 3 + static_cast<int>(rng() % 70)),
                            2 + static_cast<std::int64_t>(rng() % 30));
  r.sampling.temperature = (i % 3 == 0) ? 0.0 : 0.5 + static_cast<double>(rng() % 100) / 50.0;
  if (i % 4 == 1) r.sampling.top_k = 1 + static_cast<std::int64_t>(rng() % 40);
  if (i % 5 == 2) r.sampling.repetition_penalty = 1.3;
  if (i % 5 == 3) r.sampling.frequency_penalty = 0.7;
  if (i % 6 == 4) r.sampling.logit_bias[static_cast<std::int32_t>(rng() % 256)] = 5.0;
  if (i % 7 == 5) r.sampling.logprobs = 3;
  return r;
}

TEST(EngineSamplingTest, SeededTokensDoNotDependOnTheBatch) {
  const EngineRequest target = seeded(prompt_of(5, 40), 24, 1234);
  const auto alone = run_alone(target);
  ASSERT_EQ(alone.size(), 24u);
  std::mt19937_64 rng(99);
  for (const int others : {1, 7, 32}) {
    EngineConfig config;
    config.scheduler.max_num_batched_tokens = 48;  // chunked prefill beside decodes
    Engine e = make_engine(config);
    e.executor->hold(true);
    std::vector<std::shared_ptr<OutputStream>> streams;
    for (int i = 0; i < others; ++i) {
      auto s = e.client->submit(neighbour(rng, i));
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      streams.push_back(*s);
    }
    auto t = e.client->submit(target);
    ASSERT_TRUE(t.ok());
    e.executor->hold(false);
    EXPECT_EQ(collect(**t).tokens[0], alone) << "with " << others << " other requests";
    for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u);
  }
}

TEST(EngineSamplingTest, SeededTokensSurvivePreemption) {
  const EngineRequest target = seeded(prompt_of(9, 64), 24, 77);
  const auto alone = run_alone(target);
  EngineConfig config;
  // As in EngineCoreTest.PrefixHitsAndPreemptionKeepTheOutput: 8 sequences, room for 4.
  config.cache.num_blocks = 12;
  config.scheduler.max_model_len = 128;
  Engine e = make_engine(config);
  e.executor->hold(true);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 8; ++i) {
    auto s = e.client->submit(target);
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  e.executor->hold(false);
  for (auto& s : streams) EXPECT_EQ(collect(*s).tokens[0], alone);
  EXPECT_GT(settled_stats(*e.client).num_preemptions, 0);
}

TEST(EngineSamplingTest, UnseededRequestsDrawFromTheServerSeed) {
  EngineRequest r = seeded(prompt_of(3, 20), 32, 0);
  r.sampling.seed.reset();
  EngineConfig config;
  config.seed = 42;
  // The same server seed and order of arrival: the same tokens.
  EXPECT_EQ(run_alone(r, config), run_alone(r, config));
  // Two unseeded requests in one engine get seeds of their own.
  Engine e = make_engine(config);
  auto a = e.client->submit(r);
  auto b = e.client->submit(r);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(collect(**a).tokens[0], collect(**b).tokens[0]);
}

TEST(EngineSamplingTest, BiasAndPenaltiesReachTheExecutorsSampler) {
  // The fake's favourite leads the rest by 6 + at most 2.5; a +10 bias makes token 65 win every
  // greedy step.
  constexpr std::int32_t kBiased = 65;
  EngineRequest biased = request(prompt_of(4, 10), 30);
  biased.sampling.logit_bias[kBiased] = 10.0;
  const auto only_biased = run_alone(biased);
  EXPECT_EQ(std::count(only_biased.begin(), only_biased.end(), kBiased), 30);
  // With presence 2 and frequency 2 per use, two uses cost it 6: it falls behind the favourite
  // (>= 6 over the spread) and stays behind, so it appears at most a few times.
  EngineRequest penalized = biased;
  penalized.sampling.presence_penalty = 2.0;
  penalized.sampling.frequency_penalty = 2.0;
  const auto with_penalties = run_alone(penalized);
  ASSERT_EQ(with_penalties.size(), 30u);
  EXPECT_EQ(with_penalties[0], kBiased);
  EXPECT_LE(std::count(with_penalties.begin(), with_penalties.end(), kBiased), 3);
}

TEST(SlotAllocatorTest, HandsOutTheLowestFreeSlot) {
  SlotAllocator slots;
  EXPECT_EQ(slots.acquire(), 0);
  EXPECT_EQ(slots.acquire(), 1);
  EXPECT_EQ(slots.acquire(), 2);
  slots.release(1);
  slots.release(0);
  EXPECT_EQ(slots.num_used(), 1);
  EXPECT_EQ(slots.acquire(), 0);
  EXPECT_EQ(slots.acquire(), 1);
  EXPECT_EQ(slots.acquire(), 3);
  EXPECT_EQ(slots.capacity(), 4);
}

}  // namespace
}  // namespace pagoda::engine
