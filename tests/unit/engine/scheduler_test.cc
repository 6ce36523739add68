// Scheduler behaviour with a fake model. Timelines read left to right, one column per step:
// Pn = n prompt tokens prefilled, D = one decode token, . = not scheduled, W = waiting.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include "scheduler_test_util.h"

namespace pagoda::engine {
namespace {

using testing::expected_output;
using testing::FakeModelRunner;
using testing::make_prompt;
using testing::make_request;
using testing::make_scheduler;
using testing::run_to_completion;
using testing::scheduled_tokens;
using testing::TestLimits;

TEST(SchedulerTest, LongPromptIsChunkedBesideADecode) {
  // max_num_batched_tokens = 33: one decode + a 32-token chunk.
  //
  //   step        1    2    3    4    5    6
  //   A (4 tok)   P4   D    D    D    D    D
  //   B (100)     .    P32  P32  P32  P4   D     B samples its first token at step 5
  //   total       4    33   33   33   5    2
  TestLimits limits;
  limits.max_num_batched_tokens = 33;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(4), 100)).ok());
  SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "A"), 4);
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(100, 5000), 100)).ok());

  const std::int64_t b_chunks[] = {32, 32, 32, 4, 1};
  const std::int64_t totals[] = {33, 33, 33, 5, 2};
  for (int step = 0; step < 5; ++step) {
    std::vector<RequestUpdate> updates;
    out = runner.step(*scheduler, &updates);
    EXPECT_EQ(scheduled_tokens(out, "A"), 1) << "step " << step + 2;
    EXPECT_EQ(scheduled_tokens(out, "B"), b_chunks[step]) << "step " << step + 2;
    EXPECT_EQ(out.total_num_scheduled_tokens, totals[step]);
    const bool b_samples = step >= 3;
    EXPECT_EQ(out.requests.back().needs_sample, b_samples);
    EXPECT_EQ(updates.size(), b_samples ? 2u : 1u);  // no token for a partial prefill
  }
  EXPECT_EQ(scheduler->find_request("B")->num_output_tokens(), 2);
  // The P columns are prompt chunks, the D columns decode rows.
  const SchedulerStats stats = scheduler->stats();
  EXPECT_EQ(stats.num_scheduled_prefill_tokens, 4 + 100);
  EXPECT_EQ(stats.num_scheduled_decode_tokens, 5 + 1);
}

TEST(SchedulerTest, BudgetIsSharedInPolicyOrder) {
  // Budget 32, three 20-token prompts arriving together:
  //
  //   step        1     2     3     4
  //   R0 (20)     P20   D     D     D
  //   R1 (20)     P12   P8    D     D
  //   R2 (20)     W     P20   D     D
  //   total       32    29    3     3
  TestLimits limits;
  limits.max_num_batched_tokens = 32;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  for (int i = 0; i < 3; ++i) {
    const std::string id = "R" + std::to_string(i);
    ASSERT_TRUE(scheduler->add_request(make_request(id, make_prompt(20, 1000 * (i + 1)), 10)).ok());
  }
  SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "R0"), 20);
  EXPECT_EQ(scheduled_tokens(out, "R1"), 12);
  EXPECT_EQ(scheduled_tokens(out, "R2"), 0);
  EXPECT_EQ(scheduler->stats().num_waiting, 1);
  out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "R0"), 1);
  EXPECT_EQ(scheduled_tokens(out, "R1"), 8);
  EXPECT_EQ(scheduled_tokens(out, "R2"), 20);
  EXPECT_EQ(out.total_num_scheduled_tokens, 29);
  out = runner.step(*scheduler);
  EXPECT_EQ(out.total_num_scheduled_tokens, 3);
}

TEST(SchedulerTest, LongPrefillThresholdCapsOneRequest) {
  TestLimits limits;
  limits.max_num_batched_tokens = 64;
  limits.long_prefill_token_threshold = 16;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(40), 4)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(40, 5000), 4)).ok());
  const SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "A"), 16);
  EXPECT_EQ(scheduled_tokens(out, "B"), 16);
}

TEST(SchedulerTest, MaxNumSeqsCapsRunningRequests) {
  //   step     1    2    3    4
  //   A        P4   D    D(finishes: max_tokens 3)
  //   B        P4   D    D(finishes)
  //   C        W    W    W    P4     admitted once a seat frees
  TestLimits limits;
  limits.max_num_seqs = 2;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(4), 3)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(4, 2000), 3)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("C", make_prompt(4, 3000), 3)).ok());
  for (int step = 1; step <= 3; ++step) {
    const SchedulerOutput out = runner.step(*scheduler);
    EXPECT_EQ(out.requests.size(), 2u) << "step " << step;
    EXPECT_EQ(scheduled_tokens(out, "C"), 0) << "step " << step;
  }
  const SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "C"), 4);
  EXPECT_EQ(out.finished_request_ids, (std::vector<std::string>{"A", "B"}));
}

TEST(SchedulerTest, AdmissionWaitsForBlocksThenProceeds) {
  // 8 blocks of 4 tokens. A (20-token prompt, 4 outputs) takes 5 blocks, then a 6th when its
  // first output token is computed. B (16 tokens) needs 4 blocks and waits until A ends.
  //
  //   step     1     2    3    4    5
  //   A        P20   D    D    D(4th token: length)
  //   B        W     W    W    W    P16
  //   blocks   5     6    6    6    4
  TestLimits limits;
  limits.num_blocks = 8;
  limits.block_size = 4;
  limits.max_model_len = 32;
  limits.prefix_caching = false;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(20), 4)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(16, 5000), 4)).ok());
  const int blocks_after[] = {5, 6, 6, 0};
  for (int step = 0; step < 4; ++step) {
    const SchedulerOutput out = runner.step(*scheduler);
    EXPECT_EQ(scheduled_tokens(out, "B"), 0) << "step " << step + 1;
    EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), blocks_after[step]);
    EXPECT_TRUE(out.preempted_request_ids.empty());
  }
  EXPECT_EQ(scheduler->find_request("A"), nullptr);  // finished and released
  const SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "B"), 16);
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 4);
}

TEST(SchedulerTest, RejectsRequestsOverMaxModelLen) {
  TestLimits limits;
  limits.max_model_len = 64;
  auto scheduler = make_scheduler(limits);
  Status status = scheduler->add_request(make_request("A", make_prompt(50), 20));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("50 tokens"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("max_model_len 64"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("at most 14"), std::string::npos) << status.message();
  EXPECT_FALSE(scheduler->add_request(make_request("B", make_prompt(64), 1)).ok());
  EXPECT_FALSE(scheduler->add_request(make_request("C", {}, 1)).ok());
  EXPECT_FALSE(scheduler->add_request(make_request("D", make_prompt(4), 0)).ok());
  EXPECT_FALSE(scheduler->add_request(make_request("E", {1, -3}, 1)).ok());
  RequestOptions min_over_max;
  min_over_max.min_tokens = 5;
  EXPECT_FALSE(scheduler->add_request(make_request("F", make_prompt(4), 4, min_over_max)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("G", make_prompt(4), 4)).ok());
  EXPECT_FALSE(scheduler->add_request(make_request("G", make_prompt(4), 4)).ok());  // same id
  EXPECT_EQ(scheduler->stats().num_waiting, 1);
}

TEST(SchedulerTest, UnsetMaxTokensFinishesWithLengthAtMaxModelLen) {
  TestLimits limits;
  limits.max_model_len = 40;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(
      scheduler->add_request(std::make_unique<Request>("A", make_prompt(30), RequestOptions{}))
          .ok());
  RequestStatus last = RequestStatus::kRunning;
  std::int64_t num_output = 0;
  for (int step = 0; step < 20 && scheduler->has_unfinished_requests(); ++step) {
    std::vector<RequestUpdate> updates;
    runner.step(*scheduler, &updates);
    ASSERT_EQ(updates.size(), 1u);
    last = updates[0].status;
    num_output = updates[0].num_output_tokens;
  }
  EXPECT_EQ(last, RequestStatus::kFinishedLength);
  EXPECT_EQ(num_output, 10);  // 30 + 10 == max_model_len
  EXPECT_EQ(finish_reason(last), "length");
}

TEST(SchedulerTest, PriorityPolicyAdmitsSmallerPriorityFirst) {
  // One seat; "low" (priority 5) arrives before "high" (priority 0) and "mid" (priority 1).
  //   step   1     2     3     4    ...
  //   high   P4    D     (done)
  //   mid    W     W     P4    D    ...
  //   low    W     W     W     W    ...
  TestLimits limits;
  limits.max_num_seqs = 1;
  limits.policy = SchedulingPolicy::kPriority;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  const std::pair<const char*, int> arrivals[] = {{"low", 5}, {"high", 0}, {"mid", 1}};
  for (const auto& [id, priority] : arrivals) {
    RequestOptions options;
    options.priority = priority;
    ASSERT_TRUE(scheduler->add_request(make_request(id, make_prompt(4), 2, options)).ok());
  }
  std::vector<std::string> admitted;
  for (int step = 0; step < 10; ++step) {
    const SchedulerOutput out = runner.step(*scheduler);
    for (const ScheduledRequest& s : out.requests) {
      if (s.is_new) admitted.push_back(s.request_id);
    }
  }
  EXPECT_EQ(admitted, (std::vector<std::string>{"high", "mid", "low"}));
}

TEST(SchedulerTest, FcfsAdmitsInArrivalOrder) {
  TestLimits limits;
  limits.max_num_seqs = 1;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  for (const char* id : {"first", "second", "third"}) {
    RequestOptions options;
    options.priority = id[0] == 't' ? -10 : 0;  // ignored under FCFS
    ASSERT_TRUE(scheduler->add_request(make_request(id, make_prompt(4), 1, options)).ok());
  }
  std::vector<std::string> admitted;
  for (int step = 0; step < 6; ++step) {
    for (const ScheduledRequest& s : runner.step(*scheduler).requests) {
      if (s.is_new) admitted.push_back(s.request_id);
    }
  }
  EXPECT_EQ(admitted, (std::vector<std::string>{"first", "second", "third"}));
}

TEST(SchedulerTest, PrefixCacheHitsCountAsComputedTokens) {
  // B shares A's 40-token system prompt. Once A has run, B starts at token 32 (two whole
  // 16-token blocks); the cache content check in FakeModelRunner proves the reuse is right.
  TestLimits limits;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  auto prompt_b = make_prompt(50);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(40), 2)).ok());
  runner.step(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("B", prompt_b, 2)).ok());
  const SchedulerOutput out = runner.step(*scheduler);
  ASSERT_EQ(out.requests.size(), 2u);
  EXPECT_EQ(out.requests[1].num_computed_tokens, 32);
  EXPECT_EQ(out.requests[1].num_scheduled_tokens(), 18);
  EXPECT_EQ(scheduler->stats().prefix_cache.hits, 32);
  std::vector<RequestUpdate> updates;
  runner.step(*scheduler, &updates);
  for (const RequestUpdate& u : updates) {
    if (u.request_id == "B") {
      EXPECT_EQ(u.num_cached_prompt_tokens, 32);
    }
  }
}

TEST(SchedulerTest, SiblingsAdmittedInOneStepShareThePrompt) {
  // n = 2 without an explicit fork: the first sibling keys its full prompt blocks when they are
  // scheduled, so the second, admitted right after in the same step, hits them.
  auto scheduler = make_scheduler(TestLimits{});
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("n0", make_prompt(33), 3)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("n1", make_prompt(33), 3)).ok());
  std::vector<RequestUpdate> first;
  const SchedulerOutput out = runner.step(*scheduler, &first);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].new_token_ids, first[1].new_token_ids);
  EXPECT_EQ(scheduled_tokens(out, "n0"), 33);
  EXPECT_EQ(scheduled_tokens(out, "n1"), 1);
  EXPECT_EQ(out.requests[1].block_ids[0], out.requests[0].block_ids[0]);
  const auto outputs = run_to_completion(*scheduler, runner);
  EXPECT_EQ(outputs.at("n0"), outputs.at("n1"));
  EXPECT_EQ(outputs.at("n0").size(), 2u);
}

TEST(SchedulerTest, StopsOnEosUnlessIgnoredAndHonoursMinTokens) {
  // The script emits EOS (2) as the 2nd and 5th output of every request, 9 (a stop id) as 7th.
  constexpr std::int32_t kEos = 2;
  auto scheduler = make_scheduler(TestLimits{});
  FakeModelRunner runner(*scheduler, [](const std::string&, std::int64_t n) {
    return n == 1 || n == 4 ? kEos : n == 6 ? 9 : -1;
  });
  RequestOptions plain;
  plain.eos_token_id = kEos;
  RequestOptions ignore = plain;
  ignore.ignore_eos = true;
  RequestOptions ignore_with_stop = ignore;
  ignore_with_stop.stop_token_ids = {9};
  RequestOptions min_tokens = plain;
  min_tokens.min_tokens = 3;
  ASSERT_TRUE(scheduler->add_request(make_request("plain", make_prompt(4), 10, plain)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("ignore", make_prompt(4), 10, ignore)).ok());
  ASSERT_TRUE(
      scheduler->add_request(make_request("stop_id", make_prompt(4), 10, ignore_with_stop)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("min", make_prompt(4), 10, min_tokens)).ok());

  std::map<std::string, RequestUpdate> last;
  for (int step = 0; step < 20 && scheduler->has_unfinished_requests(); ++step) {
    std::vector<RequestUpdate> updates;
    runner.step(*scheduler, &updates);
    for (auto& u : updates) last[u.request_id] = u;
  }
  EXPECT_EQ(last["plain"].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(last["plain"].num_output_tokens, 2);
  EXPECT_EQ(last["plain"].stop_token_id, kEos);
  EXPECT_EQ(last["ignore"].status, RequestStatus::kFinishedLength);
  EXPECT_EQ(last["ignore"].num_output_tokens, 10);
  EXPECT_FALSE(last["ignore"].stop_token_id.has_value());
  EXPECT_EQ(last["stop_id"].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(last["stop_id"].num_output_tokens, 7);
  EXPECT_EQ(last["stop_id"].stop_token_id, 9);
  EXPECT_EQ(last["min"].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(last["min"].num_output_tokens, 5);  // the EOS at output 2 came before min_tokens
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

TEST(SchedulerTest, OutputsMatchTheModelRunAlone) {
  auto scheduler = make_scheduler(TestLimits{});
  FakeModelRunner runner(*scheduler);
  std::map<std::string, std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    const std::string id = "r" + std::to_string(i);
    prompts[id] = make_prompt(10 + 17 * i, 1000 + i);
    ASSERT_TRUE(scheduler->add_request(make_request(id, prompts[id], 12)).ok());
  }
  const auto outputs = run_to_completion(*scheduler, runner);
  for (const auto& [id, prompt] : prompts) {
    EXPECT_EQ(outputs.at(id), expected_output(prompt, 12)) << id;
  }
}

}  // namespace
}  // namespace pagoda::engine
