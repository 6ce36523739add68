// ModelRunner: block-id diffs build the right tables, positions and slots; finished and
// preempted requests are dropped; logits and sampling rows only for requests that sample, and the
// executor's tokens come back by row.
#include "engine/model_runner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fake_model_executor.h"

namespace pagoda::engine {
namespace {

ScheduledRequest scheduled(std::string id, std::int32_t slot, bool is_new, std::int64_t computed,
                           std::vector<std::int32_t> tokens, std::vector<std::int32_t> blocks,
                           bool needs_sample) {
  ScheduledRequest s;
  s.request_id = std::move(id);
  s.slot = slot;
  s.is_new = is_new;
  s.num_computed_tokens = computed;
  s.token_ids = std::move(tokens);
  s.block_ids = std::move(blocks);
  s.needs_sample = needs_sample;
  return s;
}

TEST(ModelRunnerTest, BuildsTheBatchFromDiffs) {
  testing::FakeModelExecutor executor;
  ASSERT_TRUE(executor.allocate_kv_cache(16, 4).ok());
  ModelRunner runner(executor, 4);

  // Step 1: A prefills 3 of 6 prompt tokens (no sample), B a 5-token prompt in full.
  SchedulerOutput step1;
  step1.requests.push_back(scheduled("A", 0, true, 0, {1, 2, 3}, {7, 2}, false));
  step1.requests.push_back(scheduled("B", 1, true, 0, {9, 9, 9, 9, 9}, {4, 9}, true));
  ASSERT_TRUE(executor.open_sampling_slot(0, {}).ok());
  ASSERT_TRUE(executor.open_sampling_slot(1, {}).ok());
  runner.prepare(step1);
  EXPECT_TRUE(runner.rows_for(0).empty());
  ASSERT_EQ(runner.rows_for(1).size(), 1u);
  EXPECT_EQ(runner.rows_for(1)[0].slot, 1);
  ASSERT_TRUE(runner.run().ok());
  const ForwardBatch& b1 = runner.batch();
  EXPECT_EQ(b1.positions, (std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b1.query_start_loc, (std::vector<std::int32_t>{0, 3, 8}));
  EXPECT_EQ(b1.seq_lens, (std::vector<std::int32_t>{3, 5}));
  EXPECT_EQ(b1.slot_mapping, (std::vector<std::int64_t>{28, 29, 30, 16, 17, 18, 19, 36}));
  EXPECT_EQ(b1.logits_indices, (std::vector<std::int32_t>{7}));
  EXPECT_EQ(runner.first_row(0), -1);
  EXPECT_EQ(runner.first_row(1), 0);
  ASSERT_EQ(runner.step_output().token_ids.size(), 1u);
  // The fake's rows have one clear favourite, which greedy rows take.
  std::vector<float> logits(259);
  ASSERT_TRUE(executor.forward(b1, logits.data()).ok());
  EXPECT_EQ(runner.step_output().token_ids[0],
            std::max_element(logits.begin(), logits.end()) - logits.begin());

  // Step 2: A finishes its prompt (a third block arrives as a diff), B decodes.
  SchedulerOutput step2;
  step2.requests.push_back(scheduled("A", 0, false, 3, {4, 5, 6, 7, 8, 9}, {11}, true));
  step2.requests.push_back(scheduled("B", 1, false, 5, {42}, {}, true));
  runner.prepare(step2);
  ASSERT_TRUE(runner.run().ok());
  const ForwardBatch& b2 = runner.batch();
  EXPECT_EQ(b2.max_blocks_per_seq, 3);
  EXPECT_EQ(b2.block_tables, (std::vector<std::int32_t>{7, 2, 11, 4, 9, -1}));
  EXPECT_EQ(b2.slot_mapping.back(), 37);
  EXPECT_EQ(b2.slot_mapping[5], 44);  // A's position 8 is in block 11
  EXPECT_EQ(b2.logits_indices, (std::vector<std::int32_t>{5, 6}));

  // Step 3: B preempted, A finished: both dropped.
  SchedulerOutput step3;
  step3.preempted_request_ids = {"B"};
  step3.preempted_slots = {1};
  step3.finished_request_ids = {"A"};
  step3.finished_slots = {0};
  EXPECT_NE(runner.block_table(1), nullptr);
  runner.prepare(step3);
  ASSERT_TRUE(runner.run().ok());
  EXPECT_EQ(runner.num_requests(), 0u);
  EXPECT_EQ(runner.block_table(1), nullptr);
}

}  // namespace
}  // namespace pagoda::engine
