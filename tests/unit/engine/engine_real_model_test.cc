// The engine over the real default model (SmolLM2-135M Q4_1): greedy outputs do not depend on
// batching, prefix-cache hits or preemption; abort frees every block; shutdown leaves no request
// without a final output. Short outputs keep each test within seconds in Release.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "engine/model_engine.h"

namespace pagoda::engine {
namespace {

const std::string kModelPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

class EngineRealModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) {
      GTEST_SKIP() << kModelPath << " is absent: run scripts/setup.sh to fetch the default model";
    }
  }

  static std::unique_ptr<EngineClient> open(std::int64_t num_blocks = 0,
                                            std::int64_t max_model_len = 256,
                                            bool async_scheduling = false) {
    EngineOptions options;
    options.engine.async_scheduling = async_scheduling;
    options.model_path = kModelPath;
    options.executor.num_threads = 2;
    options.engine.scheduler.max_model_len = max_model_len;
    options.engine.scheduler.max_num_batched_tokens = 256;
    options.engine.cache.num_blocks = num_blocks;
    if (num_blocks == 0) options.engine.kv_cache_memory_bytes = std::int64_t{256} << 20;
    auto client = open_engine(options);
    EXPECT_TRUE(client.ok()) << client.status().to_string();
    return client.ok() ? std::move(*client) : nullptr;
  }

  static std::vector<std::int32_t> prompt(int seed, int len) {
    std::vector<std::int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(1000 + (seed * 7919 + i * 104729) % 20000);
    return p;
  }

  static std::shared_ptr<OutputStream> submit(EngineClient& client, std::vector<std::int32_t> p,
                                              std::int64_t max_tokens) {
    EngineRequest r;
    r.prompt_token_ids = std::move(p);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0;
    auto s = client.submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? *s : nullptr;
  }

  // All tokens of a stream, and its final output.
  static std::pair<std::vector<std::int32_t>, StreamOutput> drain(OutputStream& stream) {
    std::vector<std::int32_t> tokens;
    StreamOutput final_output;
    while (true) {
      auto item = stream.next(std::chrono::seconds(60));
      if (!item.ok()) break;
      tokens.insert(tokens.end(), item->output.token_ids.begin(), item->output.token_ids.end());
      if (item->output.finished) final_output = std::move(*item);
    }
    EXPECT_TRUE(final_output.output.finished);
    return {tokens, std::move(final_output)};
  }

  static EngineStats settled(const EngineClient& client) {
    for (int i = 0; i < 400 && client.stats().kv_cache_usage > 0.0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return client.stats();
  }
};

TEST_F(EngineRealModelTest, GreedyOutputIsTheSameAloneAndAmong32Others) {
  auto client = open();
  ASSERT_NE(client, nullptr);
  const auto alone = drain(*submit(*client, prompt(1, 37), 12)).first;
  ASSERT_EQ(alone.size(), 12u);
  // 32 others of 3..50 prompt tokens and 2..9 output tokens, half queued before the target.
  std::vector<std::shared_ptr<OutputStream>> others;
  for (int i = 0; i < 16; ++i) {
    others.push_back(submit(*client, prompt(100 + i, 3 + (i * 7) % 48), 2 + i % 8));
  }
  auto target = submit(*client, prompt(1, 37), 12);
  for (int i = 16; i < 32; ++i) {
    others.push_back(submit(*client, prompt(100 + i, 3 + (i * 7) % 48), 2 + i % 8));
  }
  EXPECT_EQ(drain(*target).first, alone);
  for (auto& s : others) drain(*s);
}

TEST_F(EngineRealModelTest, PrefixCacheHitKeepsTheOutput) {
  auto client = open();
  ASSERT_NE(client, nullptr);
  const auto first = drain(*submit(*client, prompt(2, 70), 10)).first;
  const std::int64_t hits_before = settled(*client).prefix_cache_hits;
  auto [second, final_output] = drain(*submit(*client, prompt(2, 70), 10));
  EXPECT_EQ(second, first);
  EXPECT_GT(settled(*client).prefix_cache_hits, hits_before);
  EXPECT_EQ(final_output.output.usage.num_cached_prompt_tokens, 64);
}

TEST_F(EngineRealModelTest, PreemptionKeepsTheOutput) {
  std::vector<std::vector<std::int32_t>> alone;
  {
    auto client = open();
    ASSERT_NE(client, nullptr);
    for (int i = 0; i < 6; ++i)
      alone.push_back(drain(*submit(*client, prompt(10 + i, 40), 16)).first);
  }
  auto client = open(/*num_blocks=*/10, /*max_model_len=*/64);  // 160 tokens for 6 x 56
  ASSERT_NE(client, nullptr);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 6; ++i) streams.push_back(submit(*client, prompt(10 + i, 40), 16));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(drain(*streams[i]).first, alone[i]) << "request " << i;
  EXPECT_GT(settled(*client).num_preemptions, 0);
}

// Overlapped steps on the CPU executor (its default launch_step): the same greedy and seeded
// tokens and text as the synchronous loop, stop strings and preemption included, and every
// block back at the end.
TEST_F(EngineRealModelTest, AsyncSchedulingKeepsTheOutputs) {
  const auto run = [&](bool async) {
    auto client = open(/*num_blocks=*/10, /*max_model_len=*/64, async);
    std::vector<std::shared_ptr<OutputStream>> streams;
    for (int i = 0; i < 8; ++i) {
      EngineRequest r;
      // 8 x (28..35 + 24) tokens want 32 blocks; the pool has 10: preemption.
      r.prompt_token_ids = prompt(30 + i, 28 + i);
      r.max_tokens = 24;
      r.ignore_eos = true;
      r.sampling.temperature = i % 2 == 0 ? 0.0 : 0.9;
      r.sampling.seed = 17 + i;
      if (i % 3 == 1) r.stop = {"e", "a"};
      auto s = client->submit(std::move(r));
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      streams.push_back(*s);
    }
    std::vector<std::pair<std::vector<std::int32_t>, std::string>> outputs;
    for (auto& s : streams) {
      auto [tokens, final_output] = drain(*s);
      outputs.emplace_back(std::move(tokens), std::string(final_output.output.finish_reason()));
    }
    const EngineStats stats = settled(*client);
    EXPECT_EQ(stats.kv_cache_usage, 0.0);
    EXPECT_EQ(stats.num_slots_in_use, 0);
    EXPECT_GT(stats.num_preemptions, 0);
    return outputs;
  };
  const auto sync = run(false);
  const auto async = run(true);
  for (std::size_t i = 0; i < sync.size(); ++i) EXPECT_EQ(async[i], sync[i]) << "request " << i;
}

TEST_F(EngineRealModelTest, AbortMidGenerationFreesEveryBlock) {
  auto client = open();
  ASSERT_NE(client, nullptr);
  auto stream = submit(*client, prompt(3, 50), 150);
  ASSERT_TRUE(stream->next(std::chrono::seconds(30)).ok());
  // Stats are published after the step that delivered the output: give them a moment.
  for (int i = 0; i < 200 && client->stats().kv_cache_usage == 0.0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(client->stats().kv_cache_usage, 0.0);
  client->abort(stream->request_id());
  auto [tokens, final_output] = drain(*stream);
  EXPECT_EQ(final_output.output.finish_reason(), "abort");
  EXPECT_LT(tokens.size(), 150u);
  EXPECT_EQ(settled(*client).kv_cache_usage, 0.0);
}

TEST_F(EngineRealModelTest, ShutdownWithRequestsInFlightDeliversFinalOutputs) {
  auto client = open();
  ASSERT_NE(client, nullptr);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 8; ++i) streams.push_back(submit(*client, prompt(20 + i, 30), 100));
  ASSERT_TRUE(streams[0]->next(std::chrono::seconds(30)).ok());
  client->shutdown(/*drain=*/false);
  for (auto& s : streams) EXPECT_TRUE(drain(*s).second.output.finished);
}

}  // namespace
}  // namespace pagoda::engine
