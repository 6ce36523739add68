// Overlapped steps (EngineConfig::async_scheduling) against the synchronous loop, the reference:
// every request gets the same tokens, text and finish reason token for token, greedy and seeded,
// with stop strings, stop tokens, max_tokens, min_tokens, logprobs, penalties, aborts and
// preemption under a tiny KV pool; nothing leaks (blocks, engine slots, executor slots). Also the
// executor's default launch_step / collect_step and its placeholder resolution.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "engine_test_support.h"

namespace pagoda::engine {
namespace {

struct Result {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::string finish_reason;
};

// Traffic of every kind; seeds are explicit, so arrival order does not matter.
std::vector<EngineRequest> workload(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < n; ++i) {
    EngineRequest r = request(prompt_of(300 + i, 2 + static_cast<int>(rng() % 60)),
                              1 + static_cast<std::int64_t>(rng() % 40));
    r.request_id = "r" + std::to_string(i);
    if (i % 3 != 0) {
      r.sampling.temperature = 0.6 + static_cast<double>(rng() % 100) / 60.0;
      r.sampling.top_p = 0.95;
      r.sampling.seed = 1000 + static_cast<std::uint64_t>(i);
    }
    if (i % 4 == 1) r.stop = {"a", "e", "o", "t", "x", "Q", "7", "!"};
    if (i % 5 == 2) r.stop_token_ids = {3, 17, 99, 123, 150, 200, 201, 250};
    if (i % 10 == 7) {
      r.stop_token_ids = {3, 17, 99, 123, 150, 200, 201, 250};
      r.sampling.min_tokens = std::min<std::int64_t>(*r.max_tokens, 4);
    }
    if (i % 7 == 4) r.sampling.logprobs = 2;
    if (i % 8 == 5) r.sampling.presence_penalty = 1.5;  // counts on the executor
    if (i % 9 == 6) r.sampling.repetition_penalty = 1.4;
    requests.push_back(std::move(r));
  }
  return requests;
}

Result drain(OutputStream& stream) {
  Result result;
  while (true) {
    auto item = stream.next(std::chrono::seconds(30));
    if (!item.ok()) {
      EXPECT_EQ(item.status().code(), StatusCode::kOutOfRange) << item.status().to_string();
      break;
    }
    const RequestOutput& out = item->output;
    result.tokens.insert(result.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    result.text += out.text;
    if (out.finished) result.finish_reason = std::string(out.finish_reason());
  }
  return result;
}

EngineConfig tiny_pool(bool async) {
  EngineConfig config;
  config.async_scheduling = async;
  config.cache.num_blocks = 14;  // 224 tokens for up to 100 per request: preemption
  config.scheduler.max_model_len = 112;
  config.scheduler.max_num_batched_tokens = 48;  // chunked prefill beside decodes
  return config;
}

// Runs `requests` all at once; those in `to_abort` are aborted after their first output.
std::vector<Result> run(const EngineConfig& config, const std::vector<EngineRequest>& requests,
                        const std::set<std::size_t>& to_abort = {}, EngineStats* stats = nullptr) {
  Engine e = make_engine(config);
  e.executor->hold(true);  // everything queued before the first step
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (const EngineRequest& r : requests) {
    auto s = e.client->submit(r);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    streams.push_back(*s);
  }
  e.executor->hold(false);
  std::vector<Result> results(requests.size());
  for (const std::size_t i : to_abort) {
    auto first = streams[i]->next(std::chrono::seconds(30));
    EXPECT_TRUE(first.ok());
    results[i].tokens = first->output.token_ids;
    results[i].text = first->output.text;
    if (first->output.finished) results[i].finish_reason = first->output.finish_reason();
    e.client->abort(requests[i].request_id);
  }
  for (std::size_t i = 0; i < streams.size(); ++i) {
    Result rest = drain(*streams[i]);
    results[i].tokens.insert(results[i].tokens.end(), rest.tokens.begin(), rest.tokens.end());
    results[i].text += rest.text;
    if (!rest.finish_reason.empty()) results[i].finish_reason = rest.finish_reason;
  }
  const EngineStats settled = settled_stats(*e.client);
  // No leak: every block back in the pool, every slot free, the executor's slots closed.
  EXPECT_EQ(settled.kv_cache_usage, 0.0);
  EXPECT_EQ(settled.num_slots_in_use, 0);
  EXPECT_EQ(settled.num_running + settled.num_waiting, 0);
  EXPECT_EQ(e.executor->num_open_slots(), 0);
  if (stats != nullptr) *stats = settled;
  EXPECT_LE(e.executor->max_steps_in_flight(), 2);
  if (config.async_scheduling) {
    // It did overlap: a step launched before the previous one was collected, with tokens in
    // flight as inputs.
    EXPECT_EQ(e.executor->max_steps_in_flight(), 2);
    EXPECT_GT(e.executor->num_launches_with_previous_tokens(), 0);
  } else {
    EXPECT_EQ(e.executor->num_launches_with_previous_tokens(), 0);
  }
  return results;
}

void expect_same(const std::vector<Result>& sync, const std::vector<Result>& async) {
  ASSERT_EQ(sync.size(), async.size());
  int stopped = 0;
  for (std::size_t i = 0; i < sync.size(); ++i) {
    EXPECT_EQ(async[i].tokens, sync[i].tokens) << "request " << i;
    EXPECT_EQ(async[i].text, sync[i].text) << "request " << i;
    EXPECT_EQ(async[i].finish_reason, sync[i].finish_reason) << "request " << i;
    stopped += sync[i].finish_reason == "stop";
  }
  EXPECT_GT(stopped, 3) << "the workload should stop some requests early";
}

TEST(EngineAsyncTest, SameOutputsAsTheSynchronousLoop) {
  const std::vector<EngineRequest> requests = workload(48, 7);
  EngineConfig sync_config;
  sync_config.scheduler.max_num_batched_tokens = 48;
  EngineConfig async_config = sync_config;
  async_config.async_scheduling = true;
  EngineStats stats;
  const auto sync = run(sync_config, requests);
  const auto async = run(async_config, requests, {}, &stats);
  expect_same(sync, async);
  EXPECT_GT(stats.host_gap.steps, 0);
  EXPECT_GT(stats.host_gap.p50_seconds, 0.0);
}

TEST(EngineAsyncTest, SameOutputsUnderPreemption) {
  const std::vector<EngineRequest> requests = workload(24, 11);
  EngineStats sync_stats;
  EngineStats async_stats;
  const auto sync = run(tiny_pool(false), requests, {}, &sync_stats);
  const auto async = run(tiny_pool(true), requests, {}, &async_stats);
  expect_same(sync, async);
  EXPECT_GT(sync_stats.num_preemptions, 0);
  EXPECT_GT(async_stats.num_preemptions, 0);
}

TEST(EngineAsyncTest, AbortsMidFlightLoseNothingAndLeakNothing) {
  std::vector<EngineRequest> requests = workload(24, 13);
  std::set<std::size_t> to_abort;
  for (std::size_t i = 0; i < requests.size(); i += 3) {
    requests[i].max_tokens = 50;  // long enough to be running when the abort comes
    requests[i].stop.clear();
    requests[i].stop_token_ids.clear();
    to_abort.insert(i);
  }
  const auto reference = run(tiny_pool(false), requests);
  const auto async = run(tiny_pool(true), requests, to_abort);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!to_abort.contains(i)) {
      EXPECT_EQ(async[i].tokens, reference[i].tokens) << "request " << i;
      EXPECT_EQ(async[i].finish_reason, reference[i].finish_reason) << "request " << i;
      continue;
    }
    // What an aborted request got before the abort is the start of its full output.
    ASSERT_LE(async[i].tokens.size(), reference[i].tokens.size()) << "request " << i;
    EXPECT_TRUE(
        std::equal(async[i].tokens.begin(), async[i].tokens.end(), reference[i].tokens.begin()))
        << "request " << i;
    EXPECT_TRUE(async[i].finish_reason == "abort" || async[i].tokens == reference[i].tokens)
        << "request " << i << " ended with " << async[i].finish_reason;
  }
}

TEST(EngineAsyncTest, ReasoningBudgetRequestsWaitForTheirTokens) {
  // A budget's forced tokens come from the text, so such a request is never scheduled ahead of
  // its token in flight; its output, forced end tag included, matches the synchronous loop.
  std::vector<EngineRequest> requests = workload(12, 5);
  const std::string prompt = "Question: 2+2?\n<think>\n";
  for (std::size_t i = 0; i < requests.size(); i += 2) {
    requests[i].prompt_token_ids.assign(prompt.begin(), prompt.end());
    requests[i].max_reasoning_tokens = 3 + static_cast<std::int64_t>(i);
    requests[i].max_tokens = 30;
    requests[i].stop.clear();
    requests[i].stop_token_ids.clear();
  }
  EngineConfig config;
  config.reasoning = ReasoningTags{"<think>", "</think>"};
  const auto sync = run(config, requests);
  config.async_scheduling = true;
  const auto async = run(config, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(async[i].tokens, sync[i].tokens) << "request " << i;
    EXPECT_EQ(async[i].text, sync[i].text) << "request " << i;
  }
  EXPECT_NE(sync[0].text.find("</think>"), std::string::npos) << sync[0].text;
}

TEST(EngineAsyncTest, ShutdownWithAStepInFlightGivesEveryRequestAFinalOutput) {
  EngineConfig config;
  config.async_scheduling = true;
  Engine e = make_engine(config);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 12; ++i) {
    auto s = e.client->submit(request(prompt_of(40 + i, 20), 200));
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  ASSERT_TRUE(streams[0]->next(std::chrono::seconds(30)).ok());
  e.client->shutdown(/*drain=*/false);
  for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u);
  EXPECT_EQ(e.executor->num_open_slots(), 0);
}

TEST(EngineAsyncTest, ExecutorErrorWithAStepInFlightFailsItsRequestsAndTheEngineGoesOn) {
  EngineConfig config;
  config.async_scheduling = true;
  Engine e = make_engine(config);
  e.executor->fail_at_call(3);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 6; ++i) {
    auto s = e.client->submit(request(prompt_of(60 + i, 10), 20));
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u);
  // The engine still serves, and nothing was left behind.
  auto after = e.client->submit(request(prompt_of(70, 10), 5));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(collect(**after).tokens[0].size(), 5u);
  const EngineStats stats = settled_stats(*e.client);
  EXPECT_EQ(stats.num_failed_steps, 1);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_EQ(stats.num_slots_in_use, 0);
  EXPECT_EQ(e.executor->num_open_slots(), 0);
}

TEST(EngineAsyncTest, ExecutorErrorsUnderPreemptionLeaveNothingBehind) {
  // Failures at various steps of a preempting workload: some land while a preemption waits for
  // the step in flight, some with two steps launched.
  const std::vector<EngineRequest> requests = workload(16, 21);
  for (const std::int64_t call : {1, 4, 7, 11, 16, 23}) {
    Engine e = make_engine(tiny_pool(true));
    e.executor->fail_at_call(call);
    e.executor->hold(true);
    std::vector<std::shared_ptr<OutputStream>> streams;
    for (const EngineRequest& r : requests) {
      auto s = e.client->submit(r);
      ASSERT_TRUE(s.ok());
      streams.push_back(*s);
    }
    e.executor->hold(false);
    for (auto& s : streams) EXPECT_EQ(collect(*s).finals.size(), 1u) << "failing call " << call;
    const EngineStats stats = settled_stats(*e.client);
    EXPECT_EQ(stats.num_failed_steps, 1) << "failing call " << call;
    EXPECT_EQ(stats.kv_cache_usage, 0.0) << "failing call " << call;
    EXPECT_EQ(stats.num_slots_in_use, 0) << "failing call " << call;
    EXPECT_EQ(e.executor->num_open_slots(), 0) << "failing call " << call;
  }
}

// The base class's launch_step / collect_step over execute(): at most two steps in flight,
// outputs in launch order, and rows in from_previous_step filled from the previous step's samples.
TEST(ModelExecutorDefaultLaunchTest, ResolvesTokensInFlightFromThePreviousStep) {
  // Sequences A (block 0) and B (block 1) of one token each, then their next tokens; `swap`
  // puts B's row first.
  const auto step = [](std::int32_t a, std::int32_t b, std::int32_t pos, bool swap) {
    ForwardBatch batch;
    batch.token_ids = swap ? std::vector{b, a} : std::vector{a, b};
    batch.positions = {pos, pos};
    batch.query_start_loc = {0, 1, 2};
    batch.seq_lens = {pos + 1, pos + 1};
    batch.block_tables = swap ? std::vector{1, 0} : std::vector{0, 1};
    batch.max_blocks_per_seq = 1;
    batch.slot_mapping =
        swap ? std::vector<std::int64_t>{4 + pos, pos} : std::vector<std::int64_t>{pos, 4 + pos};
    batch.logits_indices = {0, 1};
    return batch;
  };
  SamplingBatch sampling;
  sampling.rows = {{.slot = 0}, {.slot = 1}};
  SamplingBatch swapped;
  swapped.rows = {{.slot = 1}, {.slot = 0}};
  const auto open = [](FakeModelExecutor& executor) {
    ASSERT_TRUE(executor.allocate_kv_cache(4, 4).ok());
    ASSERT_TRUE(executor.open_sampling_slot(0, {}).ok());
    ASSERT_TRUE(executor.open_sampling_slot(1, {}).ok());
  };

  // Reference: execute() with every token known.
  FakeModelExecutor reference;
  open(reference);
  StepOutput first;
  ASSERT_TRUE(reference.execute(step(5, 9, 0, false), sampling, first).ok());
  StepOutput second;
  ASSERT_TRUE(
      reference.execute(step(first.token_ids[0], first.token_ids[1], 1, true), swapped, second)
          .ok());

  FakeModelExecutor executor;
  open(executor);
  StepOutput out;
  EXPECT_EQ(executor.collect_step(out).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(executor.launch_step(step(5, 9, 0, false), sampling).ok());
  // Step 2 before step 1 is collected, B's row first: row 0 takes B's sample (previous row 1).
  ForwardBatch next = step(ForwardBatch::kTokenInFlight, ForwardBatch::kTokenInFlight, 1, true);
  next.from_previous_step = {{.token_row = 0, .previous_row = 1},
                             {.token_row = 1, .previous_row = 0}};
  ForwardBatch bad = next;
  bad.from_previous_step[1].previous_row = 2;  // the previous step had two rows
  EXPECT_EQ(executor.launch_step(bad, swapped).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(executor.launch_step(next, swapped).ok());
  EXPECT_EQ(executor.launch_step(next, swapped).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(executor.collect_step(out).ok());
  EXPECT_EQ(out.token_ids, first.token_ids);
  ASSERT_TRUE(executor.collect_step(out).ok());
  EXPECT_EQ(out.token_ids, second.token_ids);
  EXPECT_EQ(executor.collect_step(out).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(executor.max_steps_in_flight(), 2);
}

}  // namespace
}  // namespace pagoda::engine
