// The step-time budget: a fitted line t = a + b n gives the token count that keeps a step near
// the target, clamped to [min, max]; it starts from a small probe and follows a change of load.
// And the scheduler: a step-time budget below the cap limits a prefill chunk, never a decode.
#include "engine/step_time_budget.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/scheduler.h"
#include "scheduler_test_util.h"

namespace pagoda::engine {
namespace {

using testing::FakeModelRunner;
using testing::make_prompt;
using testing::make_request;
using testing::make_scheduler;
using testing::scheduled_tokens;
using testing::TestLimits;

TEST(StepTimeBudget, StartsAtTheProbeWithinTheLimits) {
  EXPECT_EQ(StepTimeBudget(0.25, 32, 2048).budget(), StepTimeBudget::kProbeTokens);
  EXPECT_EQ(StepTimeBudget(0.25, 32, 64).budget(), 64);      // the cap wins
  EXPECT_EQ(StepTimeBudget(0.25, 512, 2048).budget(), 512);  // and the floor
}

TEST(StepTimeBudget, SolvesTheFittedLineForTheTarget) {
  // 20 ms a step plus 4 ms a token: 250 ms holds (0.25 - 0.02) / 0.004 = 57 tokens.
  StepTimeBudget budget(0.25, 8, 2048);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tokens(1, 300);
  std::normal_distribution<double> noise(0.0, 0.002);
  for (int i = 0; i < 60; ++i) {
    const int n = tokens(rng);
    budget.observe(n, 0.02 + 0.004 * n + noise(rng));
  }
  EXPECT_NEAR(budget.budget(), 57, 3);
}

TEST(StepTimeBudget, ClampsToTheCapAndTheFloor) {
  StepTimeBudget fast(0.25, 16, 512);  // 0.1 ms a token: 2,300 tokens, above the cap
  StepTimeBudget slow(0.25, 16, 512);  // the per-step cost alone is over the target
  for (int n : {10, 100, 200, 50, 400}) {
    fast.observe(n, 0.01 + 0.0001 * n);
    slow.observe(n, 0.3 + 0.001 * n);
  }
  EXPECT_EQ(fast.budget(), 512);
  EXPECT_EQ(slow.budget(), 16);
}

TEST(StepTimeBudget, OneStepSizeChargesTheWholeStepPerToken) {
  // Every step the same size: no slope to fit, so t / n per token (an overestimate: shorter).
  StepTimeBudget budget(0.25, 1, 4096);
  for (int i = 0; i < 10; ++i) budget.observe(100, 0.5);
  EXPECT_EQ(budget.budget(), 50);
}

TEST(StepTimeBudget, FollowsAChangeOfLoad) {
  StepTimeBudget budget(0.2, 1, 4096);
  for (int i = 0; i < 40; ++i) budget.observe(20 + 10 * (i % 8), 0.001 * (20 + 10 * (i % 8)));
  EXPECT_NEAR(budget.budget(), 200, 5);
  // The machine gets four times slower (another process took the cores).
  for (int i = 0; i < 60; ++i) budget.observe(20 + 10 * (i % 8), 0.004 * (20 + 10 * (i % 8)));
  EXPECT_NEAR(budget.budget(), 50, 3);
}

TEST(StepTimeBudget, IgnoresEmptyAndBrokenSteps) {
  StepTimeBudget budget(0.25, 8, 2048);
  budget.observe(0, 0.1);
  budget.observe(10, 0.0);
  budget.observe(10, -1.0);
  EXPECT_EQ(budget.budget(), StepTimeBudget::kProbeTokens);
}

TEST(SchedulerTest, StepTokenBudgetChunksAPrefillAndLetsANewRequestIn) {
  // Cap 1,000 tokens, step-time budget 20. A decodes throughout.
  //
  //   step          B waiting    B mid-prefill    C arrives       budget 2 (A, B, C running)
  //   A             1            1                1               1
  //   B (100)       10 (half)    19               10 (half)       17
  //   C (3)         .            .                3 (admitted)    1
  //   total         11           20               14              19 = 3 decodes + 16
  TestLimits limits;
  limits.max_num_batched_tokens = 1000;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(make_request("A", make_prompt(4), 100)).ok());
  runner.step(*scheduler);
  scheduler->set_step_token_budget(20);
  ASSERT_TRUE(scheduler->add_request(make_request("B", make_prompt(100, 5000), 100)).ok());
  SchedulerOutput out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "A"), 1);
  EXPECT_EQ(scheduled_tokens(out, "B"), 10);
  out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "B"), 19);
  EXPECT_EQ(out.total_num_scheduled_tokens, 20);
  // A short request arriving mid-prefill is admitted at once, not after B's last chunk.
  ASSERT_TRUE(scheduler->add_request(make_request("C", make_prompt(3, 9000), 100)).ok());
  out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "A"), 1);
  EXPECT_EQ(scheduled_tokens(out, "B"), 10);
  EXPECT_EQ(scheduled_tokens(out, "C"), 3);
  // A budget below the decodes still runs every decode, plus a prefill chunk.
  scheduler->set_step_token_budget(2);
  out = runner.step(*scheduler);
  EXPECT_EQ(scheduled_tokens(out, "A"), 1);
  EXPECT_EQ(scheduled_tokens(out, "C"), 1);
  EXPECT_EQ(scheduled_tokens(out, "B"), 1 + Scheduler::kMinPrefillChunk);
  EXPECT_EQ(out.total_num_scheduled_tokens, 3 + Scheduler::kMinPrefillChunk);
}

// Closed-loop serving under the budget: 16 clients, each sending a 128-token prompt for 64
// tokens and the next as soon as one ends, on a model whose step costs 95 ms + 5.3 ms a token
// (the 1B Q4_K_M on 2 AVX-512 cores, docs/perf/llama_cpp.md). Returns the mean decode rows of
// the steady-state steps. 16 decodes cost 180 ms, so a 250 ms target leaves a prompt ~13
// tokens a step while arrivals bring 2 x 16 = 32: unless the budget counts the running
// requests, waiting prompts hold seats and the batch settles well below 16.
double steady_decode_rows(bool budget_counts_running) {
  constexpr int kClients = 16;
  TestLimits limits;
  limits.max_num_batched_tokens = 2048;
  limits.max_num_seqs = kClients;
  limits.max_model_len = 256;
  limits.num_blocks = kClients * (192 / 16) + 16;
  limits.prefix_caching = false;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  StepTimeBudget budget(0.25, 32, limits.max_num_batched_tokens);
  int next_id = 0;
  auto send = [&] {
    const int id = next_id++;
    ASSERT_TRUE(scheduler
                    ->add_request(make_request("r" + std::to_string(id),
                                               make_prompt(128, 1000 + 200 * id), 64))
                    .ok());
  };
  for (int i = 0; i < kClients; ++i) send();
  std::int64_t rows_at_warm = 0;
  constexpr int kWarmSteps = 200;
  constexpr int kSteps = 1200;
  for (int step = 0; step < kSteps; ++step) {
    if (step == kWarmSteps) rows_at_warm = scheduler->stats().num_scheduled_decode_tokens;
    scheduler->set_step_token_budget(
        budget.budget(budget_counts_running ? scheduler->num_running() : 0));
    std::vector<RequestUpdate> updates;
    const SchedulerOutput out = runner.step(*scheduler, &updates);
    budget.observe(out.total_num_scheduled_tokens,
                   0.095 + 0.0053 * static_cast<double>(out.total_num_scheduled_tokens));
    for (const RequestUpdate& u : updates) {
      if (u.finished()) send();
    }
  }
  return static_cast<double>(scheduler->stats().num_scheduled_decode_tokens - rows_at_warm) /
         (kSteps - kWarmSteps);
}

TEST(StepTimeBudget, KeepsEverySeatDecodingUnderAClosedLoopOfShortPrompts) {
  const double target_only = steady_decode_rows(false);
  const double with_running = steady_decode_rows(true);
  // 16 seats, 64 outputs after each 128-token prompt: at most 16 x 64 / 65 of them decode.
  EXPECT_LT(target_only, 12.5);
  EXPECT_GT(with_running, 14.5);
}

}  // namespace
}  // namespace pagoda::engine
