// The scheduler with drafted tokens (speculative decoding), driven by hand: drafts ride behind
// the last token within the budget, get lookahead slots at schedule time, and roll back on
// rejection; blocks holding only rejected drafts are reused or freed, never keyed for the prefix
// cache, never leaked; short blocks mean no drafts rather than a preemption.
#include <gtest/gtest.h>

#include "scheduler_test_util.h"

namespace pagoda::engine {
namespace {

using testing::make_request;
using testing::make_scheduler;
using testing::TestLimits;
using Tokens = std::vector<std::int32_t>;

const ScheduledRequest& only(const SchedulerOutput& out) {
  EXPECT_EQ(out.requests.size(), 1u);
  return out.requests.front();
}

SampledTokens one(Tokens tokens) {
  return SampledTokens{{std::move(tokens)}};
}

// Block size 4; prompt p0..p6 (7 tokens). Timeline of request "a":
//
//   step 1  prefill p0..p6            positions 0..6     blocks [B0 B1]      -> t7
//   step 2  t7 + drafts d8 d9 d10 d11 positions 7..11    + lookahead [B2]    -> d8, x9 (d9
//   rejected)
//           num_computed_tokens 7 -> 9 (= num_tokens - 1): K/V of t7 d8 kept, d9..d11 dropped
//   step 3  x9                        position 9         no new block        -> t10
TEST(SchedulerSpeculativeTest, DraftsAreScheduledVerifiedAndRolledBack) {
  TestLimits limits;
  limits.block_size = 4;
  limits.num_blocks = 16;
  limits.max_model_len = 64;
  auto scheduler = make_scheduler(limits);
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3, 4, 5, 6, 7}, 20)).ok());

  SchedulerOutput step1 = scheduler->schedule();
  EXPECT_EQ(only(step1).num_scheduled_tokens(), 7);
  scheduler->update_from_output(step1, one({70}));

  ASSERT_TRUE(scheduler->set_spec_token_ids("a", {80, 90, 100, 110}));
  SchedulerOutput step2 = scheduler->schedule();
  const ScheduledRequest& s2 = only(step2);
  EXPECT_EQ(s2.token_ids, (Tokens{70, 80, 90, 100, 110}));
  EXPECT_EQ(s2.num_spec_tokens, 4);
  EXPECT_EQ(s2.num_computed_tokens, 7);
  EXPECT_TRUE(s2.needs_sample);
  EXPECT_EQ(step2.total_num_scheduled_tokens, 5);
  EXPECT_EQ(s2.block_ids.size(), 1u);  // positions 8..11 fill a third block
  const Request* a = scheduler->find_request("a");
  EXPECT_TRUE(a->spec_token_ids().empty());  // consumed

  const auto updates = scheduler->update_from_output(step2, one({80, 99}));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].new_token_ids, (Tokens{80, 99}));
  EXPECT_EQ(a->num_tokens(), 10);
  EXPECT_EQ(a->num_computed_tokens(), 9);
  EXPECT_EQ(a->block_ids().size(), 3u);

  SchedulerOutput step3 = scheduler->schedule();
  const ScheduledRequest& s3 = only(step3);
  EXPECT_EQ(s3.token_ids, (Tokens{99}));
  EXPECT_EQ(s3.num_computed_tokens, 9);
  EXPECT_EQ(s3.num_spec_tokens, 0);
  EXPECT_TRUE(s3.block_ids.empty());  // the lookahead block is reused
  scheduler->update_from_output(step3, one({111}));

  ASSERT_TRUE(scheduler->abort_request("a"));
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_free_blocks(), 16);
  scheduler->kv_cache_manager().block_pool().check_invariants();
}

TEST(SchedulerSpeculativeTest, BlocksHoldingRejectedDraftsAreNeverKeyed) {
  TestLimits limits;
  limits.block_size = 4;
  auto scheduler = make_scheduler(limits);
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3, 4, 5, 6, 7}, 20)).ok());
  SchedulerOutput step1 = scheduler->schedule();
  scheduler->update_from_output(step1, one({8}));
  // Drafts 9 10 11 12 would fill block 2 (positions 8..11) and one more slot; all rejected.
  ASSERT_TRUE(scheduler->set_spec_token_ids("a", {9, 10, 11, 12}));
  SchedulerOutput step2 = scheduler->schedule();
  EXPECT_EQ(only(step2).num_spec_tokens, 4);
  scheduler->update_from_output(step2, one({50}));  // d9 rejected, 50 instead
  // A newcomer whose prompt is the drafted sequence may reuse blocks 0 and 1 only.
  Request probe("probe", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  scheduler->kv_cache_manager().update_block_hashes(probe);
  EXPECT_EQ(scheduler->kv_cache_manager().get_computed_blocks(probe).num_tokens, 8);
}

TEST(SchedulerSpeculativeTest, DraftsAreTrimmedToTheTokenBudget) {
  TestLimits limits;
  limits.max_num_batched_tokens = 4;
  auto scheduler = make_scheduler(limits);
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3}, 20)).ok());
  scheduler->update_from_output(scheduler->schedule(), one({4}));
  ASSERT_TRUE(scheduler->set_spec_token_ids("a", {5, 6, 7, 8, 9}));
  SchedulerOutput step = scheduler->schedule();
  EXPECT_EQ(only(step).num_spec_tokens, 3);  // 1 + 3 = the whole budget
  EXPECT_EQ(only(step).token_ids, (Tokens{4, 5, 6, 7}));
  EXPECT_EQ(step.total_num_scheduled_tokens, 4);
  // All three accepted plus a bonus token: four tokens in one step.
  const auto updates = scheduler->update_from_output(step, one({5, 6, 7, 42}));
  EXPECT_EQ(updates[0].new_token_ids, (Tokens{5, 6, 7, 42}));
  EXPECT_EQ(scheduler->find_request("a")->num_computed_tokens(), 7);
}

TEST(SchedulerSpeculativeTest, ShortBlocksMeanNoDraftsRatherThanAPreemption) {
  TestLimits limits;
  limits.block_size = 4;
  limits.num_blocks = 4;
  limits.max_model_len = 16;
  auto scheduler = make_scheduler(limits);
  // a: 7 tokens (2 blocks); b: 7 other tokens (2 blocks): the pool is full.
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3, 4, 5, 6, 7}, 8)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("b", {11, 12, 13, 14, 15, 16, 17}, 8)).ok());
  SchedulerOutput step1 = scheduler->schedule();
  ASSERT_EQ(step1.requests.size(), 2u);
  scheduler->update_from_output(step1, SampledTokens{{{8}, {8}}});
  // Drafts would need a third block for a; none is free, so a runs alone without them.
  ASSERT_TRUE(scheduler->set_spec_token_ids("a", {9, 10}));
  SchedulerOutput step2 = scheduler->schedule();
  EXPECT_TRUE(step2.preempted_request_ids.empty());
  ASSERT_EQ(step2.requests.size(), 2u);
  EXPECT_EQ(step2.requests[0].num_spec_tokens, 0);
  EXPECT_EQ(step2.requests[0].token_ids, (Tokens{8}));
}

TEST(SchedulerSpeculativeTest, StopInsideAcceptedDraftsEndsThereAndFreesEverything) {
  TestLimits limits;
  limits.block_size = 4;
  limits.num_blocks = 8;
  limits.max_model_len = 32;
  auto scheduler = make_scheduler(limits);
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3}, 3)).ok());
  scheduler->update_from_output(scheduler->schedule(), one({10}));
  ASSERT_TRUE(scheduler->set_spec_token_ids("a", {11, 12, 13}));
  SchedulerOutput step = scheduler->schedule();
  EXPECT_EQ(only(step).num_spec_tokens, 3);
  // All accepted, but max_tokens 3 ends the request after 11 and 12.
  const auto updates = scheduler->update_from_output(step, one({11, 12, 13, 14}));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].new_token_ids, (Tokens{11, 12}));
  EXPECT_EQ(updates[0].num_output_tokens, 3);
  EXPECT_TRUE(updates[0].finished());
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_free_blocks(), 8);
}

TEST(SchedulerSpeculativeTest, PreemptionDropsDrafts) {
  TestLimits limits;
  limits.block_size = 4;
  limits.num_blocks = 4;
  limits.max_model_len = 16;
  auto scheduler = make_scheduler(limits);
  ASSERT_TRUE(scheduler->add_request(make_request("a", {1, 2, 3, 4, 5, 6, 7}, 8)).ok());
  ASSERT_TRUE(scheduler->add_request(make_request("b", {1, 2, 3, 4, 5, 6, 9}, 8)).ok());
  SchedulerOutput step1 = scheduler->schedule();
  scheduler->update_from_output(step1, SampledTokens{{{8}, {8}}});
  SchedulerOutput step2 = scheduler->schedule();  // both decode position 7 in their 2nd block
  scheduler->update_from_output(step2, SampledTokens{{{9}, {9}}});
  // Position 8 needs a third block each: a gets none free, so b (the newest) is preempted.
  ASSERT_TRUE(scheduler->set_spec_token_ids("b", {10, 11}));
  SchedulerOutput step3 = scheduler->schedule();
  EXPECT_EQ(step3.preempted_request_ids, (std::vector<std::string>{"b"}));
  EXPECT_TRUE(scheduler->find_request("b")->spec_token_ids().empty());
  EXPECT_EQ(scheduler->find_request("b")->num_computed_tokens(), 0);
}

}  // namespace
}  // namespace pagoda::engine
