// The engine loop through EngineClient over a fake executor: streams end with exactly one final
// output, outputs do not depend on batching, prefix hits or preemption, errors and aborts free
// every block, and shutdown leaves no request without its final output.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "engine_test_support.h"

namespace pagoda::engine {
namespace {

std::vector<std::int32_t> run_alone(std::vector<std::int32_t> prompt, std::int64_t max_tokens) {
  Engine e = make_engine();
  auto stream = e.client->submit(request(std::move(prompt), max_tokens));
  EXPECT_TRUE(stream.ok());
  return collect(**stream).tokens[0];
}

TEST(EngineCoreTest, StreamsEveryTokenAndOneFinalOutput) {
  Engine e = make_engine();
  auto stream = e.client->submit(request(prompt_of(1, 20), 12));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  Collected c = collect(**stream);
  EXPECT_EQ(c.tokens[0].size(), 12u);
  ASSERT_TRUE(c.finals.contains(0));
  EXPECT_EQ(c.finals[0].output.finish_reason(), "length");
  EXPECT_EQ(c.finals[0].output.usage.num_completion_tokens, 12);
  EXPECT_TRUE((*stream)->ended());
  EXPECT_EQ(e.client->num_in_flight(), 0);
}

TEST(EngineCoreTest, OutputDoesNotDependOnTheBatch) {
  const auto alone = run_alone(prompt_of(5, 40), 16);
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 48;  // chunked prefill beside decodes
  Engine e = make_engine(config);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 32; ++i) {
    auto s = e.client->submit(request(prompt_of(100 + i, 3 + (i * 13) % 90), 4 + i % 20));
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  auto target = e.client->submit(request(prompt_of(5, 40), 16));
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(collect(**target).tokens[0], alone);
  for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u);
}

TEST(EngineCoreTest, PrefixHitsAndPreemptionKeepTheOutput) {
  const auto alone = run_alone(prompt_of(9, 64), 24);
  EngineConfig config;
  // 12 blocks of 16: the 4 shared prompt blocks plus 2 private blocks per 88-token sequence
  // fit only 4 of the 8 at once.
  config.cache.num_blocks = 12;
  config.scheduler.max_model_len = 128;
  Engine e = make_engine(config);
  e.executor->hold(true);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 8; ++i) {
    auto s = e.client->submit(request(prompt_of(9, 64), 24));
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  e.executor->hold(false);
  for (auto& s : streams) EXPECT_EQ(collect(*s).tokens[0], alone);
  const EngineStats stats = settled_stats(*e.client);
  EXPECT_GT(stats.prefix_cache_hits, 0);
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
}

TEST(EngineCoreTest, ExecutorErrorFailsTheStepAndTheEngineGoesOn) {
  Engine e = make_engine();
  e.executor->fail_at_call(3);
  e.executor->hold(true);
  auto a = e.client->submit(request(prompt_of(1, 10), 20));
  auto b = e.client->submit(request(prompt_of(2, 10), 20));
  ASSERT_TRUE(a.ok() && b.ok());
  e.executor->hold(false);
  for (auto* s : {&*a, &*b}) {
    Collected c = collect(**s);
    ASSERT_TRUE(c.finals.contains(0));
    EXPECT_EQ(c.finals[0].error.code(), StatusCode::kInternal);
    EXPECT_EQ(c.finals[0].output.finish_reason(), "abort");
  }
  EXPECT_EQ(settled_stats(*e.client).kv_cache_usage, 0.0);
  EXPECT_EQ(e.client->stats().num_failed_steps, 1);
  auto later = e.client->submit(request(prompt_of(1, 10), 5));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(collect(**later).tokens[0].size(), 5u);
}

TEST(EngineCoreTest, AbortFreesEveryBlock) {
  Engine e = make_engine();
  // The second step (the first decode) waits until released, so the request cannot run to its
  // length limit before the abort lands, however the test thread is scheduled.
  e.executor->hold_at_call(1);
  auto s = e.client->submit(request(prompt_of(3, 30), 400));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->next(std::chrono::seconds(10)).ok());  // generating
  e.client->abort((*s)->request_id());
  e.executor->hold(false);
  Collected c = collect(**s);
  ASSERT_TRUE(c.finals.contains(0));
  EXPECT_EQ(c.finals[0].output.finish_reason(), "abort");
  EXPECT_EQ(settled_stats(*e.client).kv_cache_usage, 0.0);
}

TEST(EngineCoreTest, StatsSeenAtTheFinalOutputCountItsBlocksFreed) {
  // A client that reads the metrics once it has its answer must see the request gone, not the
  // step before (an idle baseline read that way was once a block too high). The listener runs
  // on the engine's thread right after each push, so it reads the stats at that very moment.
  for (const bool async : {false, true}) {
    EngineConfig config;
    config.async_scheduling = async;
    Engine e = make_engine(config);
    e.executor->hold(true);
    auto stream = e.client->submit(request(prompt_of(4, 40), 6));
    ASSERT_TRUE(stream.ok());
    std::optional<EngineStats> at_final;
    std::atomic<bool> seen = false;  // published after at_final is written
    (*stream)->set_listener([&] {
      while (auto item = (*stream)->try_next()) {
        if (!item->output.finished) continue;
        at_final = e.client->stats();
        seen = true;
      }
    });
    e.executor->hold(false);
    for (int i = 0; i < 2000 && !seen; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(at_final) << "async " << async;
    EXPECT_EQ(at_final->kv_cache_usage, 0.0) << "async " << async;
    EXPECT_EQ(at_final->num_running, 0) << "async " << async;
  }
}

TEST(EngineCoreTest, ShutdownGivesEveryAcceptedRequestAFinalOutput) {
  Engine e = make_engine();
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 10; ++i) streams.push_back(*e.client->submit(request(prompt_of(i, 20), 300)));
  e.client->shutdown(/*drain=*/false);
  for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u);
  EXPECT_EQ(e.client->submit(request(prompt_of(1, 5), 5)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_FALSE(e.client->healthy());
}

TEST(EngineCoreTest, DrainingShutdownFinishesRequests) {
  Engine e = make_engine();
  auto s = e.client->submit(request(prompt_of(4, 20), 30));
  ASSERT_TRUE(s.ok());
  e.client->shutdown(/*drain=*/true);
  Collected c = collect(**s);
  EXPECT_EQ(c.tokens[0].size(), 30u);
  EXPECT_EQ(c.finals[0].output.finish_reason(), "length");
}

TEST(EngineCoreTest, NSamplesShareThePromptAndEndTheStreamTogether) {
  Engine e = make_engine();
  EngineRequest r = request(prompt_of(6, 48), 8);
  r.sampling.temperature = 1.0;
  r.sampling.seed = 7;
  r.sampling.n = 3;
  auto s = e.client->submit(r);
  ASSERT_TRUE(s.ok());
  Collected c = collect(**s);
  EXPECT_EQ(c.finals.size(), 3u);
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(c.tokens[i].size(), 8u);
  EXPECT_GT(settled_stats(*e.client).prefix_cache_hits, 0);
}

TEST(EngineCoreTest, SlowConsumerGetsCoalescedDeltasAndLosesNothing) {
  EngineConfig config;
  config.output_channel_capacity = 2;
  Engine e = make_engine(config);
  auto s = e.client->submit(request(prompt_of(8, 10), 60));
  ASSERT_TRUE(s.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the engine run ahead
  Collected c = collect(**s);
  EXPECT_EQ(c.tokens[0].size(), 60u);
  EXPECT_LT(c.num_outputs, 60);
}

TEST(EngineCoreTest, ReusedIdOfALiveRequestIsRefused) {
  Engine e = make_engine();
  EngineRequest r = request(prompt_of(1, 4), 8);
  r.request_id = "same";
  e.executor->hold(true);  // the first is still running when the second arrives
  auto first = e.client->submit(r);
  auto second = e.client->submit(r);
  ASSERT_TRUE(first.ok() && second.ok());
  e.executor->hold(false);
  const Collected refused = collect(**second);
  ASSERT_TRUE(refused.finals.contains(0));
  const Status& error = refused.finals.at(0).error;
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(error.message().find("'same'"), std::string::npos) << error.message();
  EXPECT_TRUE(refused.tokens.at(0).empty());
  // The live one is untouched.
  const Collected kept = collect(**first);
  EXPECT_EQ(kept.tokens.at(0).size(), 8u);
  EXPECT_TRUE(kept.finals.at(0).error.ok());
}

TEST(EngineCoreTest, RejectsBadRequestsWithStatuses) {
  EngineConfig config;
  config.scheduler.max_model_len = 64;
  config.scheduler.max_num_seqs = 1;
  config.max_waiting_requests = 1;
  Engine e = make_engine(config);
  e.executor->hold(true);  // nothing finishes while the queue limit is probed
  EXPECT_EQ(e.client->submit(request({}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.client->submit(request(prompt_of(1, 64), 4)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(e.client->submit(request(prompt_of(1, 60), 10)).status().code(),
            StatusCode::kInvalidArgument);
  EngineRequest bad = request(prompt_of(1, 4), 4);
  bad.sampling.top_p = 0.0;
  const Status s = e.client->submit(bad).status();
  EXPECT_NE(s.message().find("top_p"), std::string::npos);
  bad = request(prompt_of(1, 4), 4);
  bad.sampling.logit_bias[9999] = 1.0;
  EXPECT_EQ(e.client->submit(bad).status().code(), StatusCode::kInvalidArgument);
  auto a = e.client->submit(request(prompt_of(1, 4), 50));
  auto b = e.client->submit(request(prompt_of(2, 4), 50));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(e.client->submit(request(prompt_of(3, 4), 50)).status().code(),
            StatusCode::kResourceExhausted);
  e.executor->hold(false);
  collect(**a);
  collect(**b);
}

TEST(EngineConfigTest, SizesTheKvPoolFromTheBudget) {
  FakeModelExecutor executor;  // 8 bytes per token
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 64;
  config.kv_cache_memory_bytes = 16 * 8 * 100;
  auto resolved = resolve_engine_config(config, executor);
  ASSERT_TRUE(resolved.ok()) << resolved.status().to_string();
  EXPECT_EQ(resolved->cache.num_blocks, 100);
  EXPECT_EQ(resolved->scheduler.max_model_len, 512);
  config.kv_cache_memory_bytes = 16 * 8 * 10;  // 160 tokens < max_model_len 512
  EXPECT_EQ(resolve_engine_config(config, executor).status().code(), StatusCode::kInvalidArgument);
  config.kv_cache_memory_bytes.reset();  // default: max_num_seqs x max_model_len
  resolved = resolve_engine_config(config, executor);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->cache.num_blocks, 256 * 512 / 16);
}

}  // namespace
}  // namespace pagoda::engine
