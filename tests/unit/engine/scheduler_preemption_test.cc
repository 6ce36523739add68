// Preemption (recompute) and abort. Timelines: Pn = n tokens prefilled, D = decode,
// X = preempted this step, W = waiting, A! = aborted here.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
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

// 6 blocks of 4 tokens: two 8-token prompts fit, then both grow until the pool runs dry.
TestLimits tight_pool(bool prefix_caching) {
  TestLimits limits;
  limits.num_blocks = 6;
  limits.block_size = 4;
  limits.max_model_len = 24;
  limits.prefix_caching = prefix_caching;
  return limits;
}

class PreemptionTest : public ::testing::TestWithParam<bool> {};

TEST_P(PreemptionTest, NewestIsPreemptedAndResumesToTheSameTokens) {
  //   step    1    2    3    4    5    6    7 .. 12        13              14 ..
  //   A       P8   D    D    D    D    D    D .. D(12th)   (done)
  //   B       P8   D    D    D    D    X    W .. W         P13 (resumed)   D ..
  //   blocks  4    6    6    6    6    4+1  ...
  // At step 6 A's 13th token needs a 4th block; none is free, so B (newest) gives up its
  // three. B then recomputes prompt + its 5 outputs and must produce the same 12 tokens.
  auto scheduler = make_scheduler(tight_pool(GetParam()));
  FakeModelRunner runner(*scheduler);
  const auto prompt_a = make_prompt(8, 1000);
  const auto prompt_b = make_prompt(8, 2000);
  ASSERT_TRUE(scheduler->add_request(make_request("A", prompt_a, 12)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("B", prompt_b, 12)).ok());
  std::map<std::string, std::vector<std::int32_t>> outputs;
  auto collect = [&](const std::vector<RequestUpdate>& updates) {
    for (const auto& u : updates) {
      outputs[u.request_id].insert(outputs[u.request_id].end(), u.new_token_ids.begin(),
                                   u.new_token_ids.end());
    }
  };
  for (int step = 1; step <= 5; ++step) {
    std::vector<RequestUpdate> updates;
    const SchedulerOutput out = runner.step(*scheduler, &updates);
    collect(updates);
    EXPECT_TRUE(out.preempted_request_ids.empty()) << "step " << step;
  }
  std::vector<RequestUpdate> updates;
  SchedulerOutput out = runner.step(*scheduler, &updates);
  collect(updates);
  EXPECT_EQ(out.preempted_request_ids, std::vector<std::string>{"B"});
  EXPECT_EQ(scheduled_tokens(out, "B"), 0);
  const Request* b = scheduler->find_request("B");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->status(), RequestStatus::kPreempted);
  EXPECT_EQ(b->num_computed_tokens(), 0);
  EXPECT_TRUE(b->block_ids().empty());
  EXPECT_EQ(b->num_output_tokens(), 5);
  EXPECT_EQ(scheduler->stats().num_preemptions, 1);

  bool resumed_seen = false;
  for (int step = 7; step < 40 && scheduler->has_unfinished_requests(); ++step) {
    out = runner.step(*scheduler, &updates);
    collect(updates);
    for (const ScheduledRequest& s : out.requests) {
      if (s.request_id != "B" || !s.resumed_from_preemption) continue;
      resumed_seen = true;
      EXPECT_EQ(step, 13);
      EXPECT_TRUE(s.is_new);
      EXPECT_EQ(s.num_computed_tokens + s.num_scheduled_tokens(), 13);  // prompt + 5 outputs
    }
  }
  EXPECT_TRUE(resumed_seen);
  EXPECT_EQ(outputs["A"], expected_output(prompt_a, 12));
  EXPECT_EQ(outputs["B"], expected_output(prompt_b, 12));
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

INSTANTIATE_TEST_SUITE_P(PrefixCaching, PreemptionTest, ::testing::Bool());

TEST(SchedulerPreemptionTest, PriorityPolicyPreemptsLowestPriorityNotNewest) {
  TestLimits limits = tight_pool(false);
  limits.policy = SchedulingPolicy::kPriority;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  RequestOptions low;
  low.priority = 5;
  RequestOptions high;
  high.priority = 0;
  ASSERT_TRUE(scheduler->add_request(make_request("low", make_prompt(8), 12, low)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("high", make_prompt(8, 2000), 12, high)).ok());
  std::vector<std::string> preempted;
  for (int step = 0; step < 40 && scheduler->has_unfinished_requests(); ++step) {
    const SchedulerOutput out = runner.step(*scheduler);
    preempted.insert(preempted.end(), out.preempted_request_ids.begin(),
                     out.preempted_request_ids.end());
  }
  EXPECT_EQ(preempted, std::vector<std::string>{"low"});
}

TEST(SchedulerPreemptionTest, LastRunningRequestPreemptsItself) {
  // Pool of 4 blocks of 4 tokens.
  //   step    1        2                       3
  //   A       P8 (2)   D (takes the last block, finishes: max_tokens 2)
  //   B       P4 (1)   X  needs a 2nd block; it is last in the queue, so it is the victim
  //                                            P5 (resumed: prompt + 1 output)
  // Nobody already served this step is ever preempted.
  TestLimits limits;
  limits.num_blocks = 4;
  limits.block_size = 4;
  limits.max_model_len = 16;
  limits.prefix_caching = false;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(8), 2)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(4, 2000), 4)).ok());
  runner.step(*scheduler);
  SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(out.preempted_request_ids, std::vector<std::string>{"B"});
  EXPECT_EQ(scheduled_tokens(out, "A"), 1);
  out = runner.step(*scheduler);
  EXPECT_EQ(out.finished_request_ids, std::vector<std::string>{"A"});
  EXPECT_EQ(scheduled_tokens(out, "B"), 5);
  EXPECT_TRUE(out.requests[0].resumed_from_preemption);
  const auto outputs = run_to_completion(*scheduler, runner);
  EXPECT_EQ(outputs.at("B").size(), 2u);  // 2 more after the 2 of steps 1 and 3
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

// Every block a running request holds is counted once; nothing else is used.
void expect_no_block_leak(const Scheduler& scheduler) {
  const BlockPool& pool = scheduler.kv_cache_manager().block_pool();
  pool.check_invariants();
  std::int32_t held = 0;
  for (const Request* r : scheduler.running()) {
    held += static_cast<std::int32_t>(r->block_ids().size());
  }
  // Without prefix hits or forks every used block has exactly one holder.
  EXPECT_EQ(pool.num_used_blocks(), held);
}

TEST(SchedulerAbortTest, RunningMidPrefill) {
  TestLimits limits = tight_pool(false);
  limits.max_num_batched_tokens = 8;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(20), 2)).ok());
  runner.step(*scheduler);  // P8 of 20
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 2);
  EXPECT_TRUE(scheduler->abort_request("A"));
  expect_no_block_leak(*scheduler);
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
  EXPECT_EQ(scheduler->schedule().finished_request_ids, std::vector<std::string>{"A"});
}

class AbortTest : public ::testing::Test {
 protected:
  std::unique_ptr<Scheduler> scheduler_ = make_scheduler(tight_pool(false));
  FakeModelRunner runner_{*scheduler_};
};

TEST_F(AbortTest, Waiting) {
  ASSERT_TRUE(scheduler_->add_request(make_request("A", make_prompt(8), 4)).ok());
  EXPECT_TRUE(scheduler_->abort_request("A"));
  EXPECT_FALSE(scheduler_->abort_request("A"));
  EXPECT_FALSE(scheduler_->has_unfinished_requests());
  // The runner never saw it, so it is not in finished_request_ids.
  EXPECT_TRUE(scheduler_->schedule().finished_request_ids.empty());
}

TEST_F(AbortTest, RunningDecodingBesideOthers) {
  ASSERT_TRUE(scheduler_->add_request(make_request("A", make_prompt(8), 10)).ok());
  ASSERT_TRUE(scheduler_->add_request(make_request("B", make_prompt(4, 2000), 10)).ok());
  runner_.step(*scheduler_);
  runner_.step(*scheduler_);
  EXPECT_TRUE(scheduler_->abort_request("A"));
  expect_no_block_leak(*scheduler_);
  EXPECT_EQ(scheduler_->kv_cache_manager().block_pool().num_used_blocks(), 2);  // B's
  const auto outputs = run_to_completion(*scheduler_, runner_);
  EXPECT_EQ(outputs.at("B").size(), 8u);  // 2 before the abort
  EXPECT_EQ(scheduler_->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

TEST_F(AbortTest, Preempted) {
  ASSERT_TRUE(scheduler_->add_request(make_request("A", make_prompt(8), 12)).ok());
  ASSERT_TRUE(scheduler_->add_request(make_request("B", make_prompt(8, 2000), 12)).ok());
  for (int step = 0; step < 6; ++step) runner_.step(*scheduler_);
  ASSERT_EQ(scheduler_->find_request("B")->status(), RequestStatus::kPreempted);
  EXPECT_TRUE(scheduler_->abort_request("B"));
  expect_no_block_leak(*scheduler_);
  EXPECT_EQ(scheduler_->stats().num_waiting, 0);
  run_to_completion(*scheduler_, runner_);
  EXPECT_EQ(scheduler_->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

TEST_F(AbortTest, BetweenScheduleAndUpdateDropsItsTokens) {
  ASSERT_TRUE(scheduler_->add_request(make_request("A", make_prompt(8), 4)).ok());
  const SchedulerOutput out = scheduler_->schedule();
  const SampledTokens sampled = runner_.execute(out);
  EXPECT_TRUE(scheduler_->abort_request("A"));
  EXPECT_TRUE(scheduler_->update_from_output(out, sampled).empty());
  expect_no_block_leak(*scheduler_);
}

}  // namespace
}  // namespace pagoda::engine
