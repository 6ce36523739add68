#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda::engine {
namespace {

BlockHash key(std::uint64_t n) {
  return {n, ~n};
}

TEST(BlockPoolTest, StartsAllFreeInIdOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.num_used_blocks(), 0);
  EXPECT_EQ(pool.free_queue(), (std::vector<std::int32_t>{0, 1, 2, 3}));
  pool.check_invariants();
}

TEST(BlockPoolTest, AllocateTakesFromHeadAndCountsUsage) {
  BlockPool pool(4);
  std::vector<std::int32_t> got;
  pool.allocate(3, got);
  EXPECT_EQ(got, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
  for (const std::int32_t id : got) EXPECT_EQ(pool.ref_count(id), 1);
  pool.check_invariants();
}

TEST(BlockPoolTest, KeyedBlocksGoToTailUnkeyedToHead) {
  BlockPool pool(4);
  std::vector<std::int32_t> got;
  pool.allocate(4, got);
  ASSERT_TRUE(pool.cache_block(1, key(1)));
  ASSERT_TRUE(pool.cache_block(2, key(2)));
  // Free 1 (keyed), 0 (unkeyed), 2 (keyed), 3 (unkeyed):
  //   after 1:  [1]
  //   after 0:  [0, 1]        unkeyed -> head
  //   after 2:  [0, 1, 2]     keyed   -> tail
  //   after 3:  [3, 0, 1, 2]
  for (const std::int32_t id : {1, 0, 2, 3}) pool.free(std::vector<std::int32_t>{id});
  EXPECT_EQ(pool.free_queue(), (std::vector<std::int32_t>{3, 0, 1, 2}));
  pool.check_invariants();
}

TEST(BlockPoolTest, FreedKeyedBlockStaysFindableUntilReallocated) {
  BlockPool pool(2);
  std::vector<std::int32_t> got;
  pool.allocate(1, got);
  ASSERT_TRUE(pool.cache_block(0, key(7)));
  pool.free(got);
  EXPECT_EQ(pool.get_cached_block(key(7)), 0);  // residue: free but findable
  got.clear();
  pool.allocate(1, got);  // block 1 (unkeyed head)
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(pool.get_cached_block(key(7)), 0);
  got.clear();
  pool.allocate(1, got);  // block 0: reallocation evicts its key
  EXPECT_EQ(got[0], 0);
  EXPECT_FALSE(pool.get_cached_block(key(7)).has_value());
  EXPECT_FALSE(pool.block_hash(0).has_value());
  pool.check_invariants();
}

TEST(BlockPoolTest, TouchRevivesFreeBlockFromMiddleOfQueue) {
  BlockPool pool(3);
  std::vector<std::int32_t> got;
  pool.allocate(3, got);
  for (const std::int32_t id : got) ASSERT_TRUE(pool.cache_block(id, key(100 + id)));
  pool.free(got);  // queue [0, 1, 2]
  const std::vector<std::int32_t> hit{1};
  pool.touch(hit);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.free_queue(), (std::vector<std::int32_t>{0, 2}));
  pool.touch(hit);  // a second holder shares it
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_EQ(pool.num_used_blocks(), 1);
  pool.free(hit);
  EXPECT_EQ(pool.num_used_blocks(), 1);
  pool.free(hit);
  EXPECT_EQ(pool.free_queue(), (std::vector<std::int32_t>{0, 2, 1}));
  pool.check_invariants();
}

TEST(BlockPoolTest, DuplicateKeyKeepsFirstHolder) {
  BlockPool pool(2);
  std::vector<std::int32_t> got;
  pool.allocate(2, got);
  EXPECT_TRUE(pool.cache_block(0, key(5)));
  EXPECT_FALSE(pool.cache_block(1, key(5)));
  EXPECT_EQ(pool.get_cached_block(key(5)), 0);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  pool.check_invariants();
}

TEST(BlockPoolTest, ResetPrefixCacheOnlyWhenIdle) {
  BlockPool pool(2);
  std::vector<std::int32_t> got;
  pool.allocate(1, got);
  ASSERT_TRUE(pool.cache_block(0, key(1)));
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free(got);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  pool.check_invariants();
}

TEST(BlockPoolDeathTest, DoubleFreeIsCaught) {
  BlockPool pool(2);
  std::vector<std::int32_t> got;
  pool.allocate(1, got);
  pool.free(got);
  EXPECT_DEATH(pool.free(got), "double free of KV block 0");
}

TEST(BlockPoolDeathTest, OverCommitIsCaught) {
  BlockPool pool(2);
  std::vector<std::int32_t> got;
  EXPECT_DEATH(pool.allocate(3, got), "over-commit");
}

}  // namespace
}  // namespace pagoda::engine
