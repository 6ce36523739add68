// A batch the kernels would index out of bounds with is rejected before it reaches them.
#include "models/forward_batch_check.h"

#include <gtest/gtest.h>

#include "models/single_sequence_batcher.h"

namespace pagoda::models {
namespace {

const ForwardBatchLimits kLimits{.vocab_size = 100,
                                 .max_model_len = 64,
                                 .max_num_batched_tokens = 16,
                                 .num_blocks = 8,
                                 .block_size = 4};

// The example of forward_batch.h: seq 0 prefills positions 2..4, seq 1 decodes position 5.
ForwardBatch two_sequences() {
  ForwardBatch b;
  b.token_ids = {10, 11, 12, 13};
  b.positions = {2, 3, 4, 5};
  b.query_start_loc = {0, 3, 4};
  b.seq_lens = {5, 6};
  b.max_blocks_per_seq = 3;
  b.block_tables = {7, 2, -1, 4, 6, -1};
  b.slot_mapping = {30, 31, 8, 25};
  b.logits_indices = {2, 3};
  return b;
}

TEST(ForwardBatchCheckTest, AcceptsAConsistentBatch) {
  EXPECT_TRUE(check_forward_batch(two_sequences(), kLimits).ok());
}

TEST(ForwardBatchCheckTest, RejectsEachKindOfInconsistency) {
  auto expect_bad = [](ForwardBatch b, const std::string& fragment) {
    const Status s = check_forward_batch(b, kLimits);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  };
  ForwardBatch b = two_sequences();
  b.token_ids[0] = 100;
  expect_bad(b, "token id 100");
  b = two_sequences();
  b.positions[1] = 7;
  expect_bad(b, "has position 7, expected 3");
  b = two_sequences();
  b.slot_mapping[2] = 9;
  expect_bad(b, "has slot 9, its block table says 8");
  b = two_sequences();
  b.block_tables[1] = 8;
  expect_bad(b, "block 8 of sequence 0");
  b = two_sequences();
  b.seq_lens[1] = 65;
  expect_bad(b, "seq_lens[1] = 65");
  b = two_sequences();
  b.query_start_loc = {0, 2, 4};
  expect_bad(b, "position");
  b = two_sequences();
  b.logits_indices = {4};
  expect_bad(b, "logits index 4");
  b = two_sequences();
  b.slot_mapping.pop_back();
  expect_bad(b, "one entry per token");
}

TEST(SingleSequenceBatcherTest, PositionIsSlotAndLogitsComeFromTheLastToken) {
  SingleSequenceBatcher batcher(4, 3);
  ForwardBatch batch;
  const std::int32_t prompt[] = {5, 6, 7, 8, 9};
  ASSERT_TRUE(batcher.next(prompt, batch).ok());
  EXPECT_EQ(batch.positions, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(batch.slot_mapping, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(batch.seq_lens, (std::vector<std::int32_t>{5}));
  EXPECT_EQ(batch.logits_indices, (std::vector<std::int32_t>{4}));
  EXPECT_TRUE(check_forward_batch(batch, kLimits).ok());
  const std::int32_t next[] = {1};
  ASSERT_TRUE(batcher.next(next, batch).ok());
  EXPECT_EQ(batch.positions, (std::vector<std::int32_t>{5}));
  EXPECT_EQ(batch.seq_lens, (std::vector<std::int32_t>{6}));
  const std::int32_t too_many[] = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(batcher.next(too_many, batch).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace pagoda::models
