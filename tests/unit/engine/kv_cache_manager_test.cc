#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fake_model_runner.h"

namespace pagoda::engine {
namespace {

using testing::make_prompt;

CacheConfig cache_config(std::int64_t num_blocks, std::int64_t block_size = 4) {
  CacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  return c;
}

std::unique_ptr<Request> make_request(KvCacheManager& kv, const std::string& id,
                                      std::vector<std::int32_t> prompt, std::string salt = {}) {
  RequestOptions options;
  options.cache_salt = std::move(salt);
  auto r = std::make_unique<Request>(id, std::move(prompt), std::move(options));
  kv.update_block_hashes(*r);
  return r;
}

// Admits `r` the way the scheduler does: prefix hits, then the rest of its tokens in one go.
std::int64_t admit_whole(KvCacheManager& kv, Request& r) {
  const ComputedBlocks hits = kv.get_computed_blocks(r);
  const auto blocks = kv.allocate_slots(r, r.num_tokens() - hits.num_tokens, hits);
  EXPECT_TRUE(blocks.has_value());
  r.set_num_computed_tokens(r.num_tokens());
  return hits.num_tokens;
}

TEST(KvCacheManagerTest, AllocatesWholeBlocksAndReturnsOnlyNewOnes) {
  KvCacheManager kv(cache_config(8));
  auto r = make_request(kv, "a", make_prompt(6));
  // 6 tokens, block_size 4:  [t0 t1 t2 t3][t4 t5 __ __]  -> 2 blocks
  auto blocks = kv.allocate_slots(*r, 6);
  ASSERT_TRUE(blocks.has_value());
  EXPECT_EQ(blocks->size(), 2u);
  r->set_num_computed_tokens(6);
  r->append_output_token(7);
  kv.update_block_hashes(*r);
  // Position 6 still fits in block 2: nothing new.
  blocks = kv.allocate_slots(*r, 1);
  ASSERT_TRUE(blocks.has_value());
  EXPECT_TRUE(blocks->empty());
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 2);
  kv.free(*r);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  kv.block_pool().check_invariants();
}

TEST(KvCacheManagerTest, FailsRatherThanOverCommits) {
  KvCacheManager kv(cache_config(3));
  auto a = make_request(kv, "a", make_prompt(8));
  auto b = make_request(kv, "b", make_prompt(8, 5000));
  ASSERT_TRUE(kv.allocate_slots(*a, 8).has_value());  // 2 of 3 blocks
  EXPECT_FALSE(kv.allocate_slots(*b, 8).has_value());
  EXPECT_TRUE(b->block_ids().empty());  // all or nothing
  EXPECT_EQ(kv.block_pool().num_free_blocks(), 1);
  EXPECT_TRUE(kv.allocate_slots(*b, 4).has_value());  // one chunk fits
  kv.block_pool().check_invariants();
}

TEST(KvCacheManagerTest, LookaheadSlotsReserveBlocks) {
  KvCacheManager kv(cache_config(8));
  auto r = make_request(kv, "a", make_prompt(4));
  const auto blocks = kv.allocate_slots(*r, 4, {}, /*num_lookahead_tokens=*/3);
  ASSERT_TRUE(blocks.has_value());
  EXPECT_EQ(blocks->size(), 2u);  // 4 + 3 tokens need 2 blocks
}

TEST(KvCacheManagerTest, PrefixHitIsSharedPrefixRoundedDownToBlocks) {
  // A computes 10 tokens; B shares its first 9. block_size 4:
  //   A  [a0 a1 a2 a3][a4 a5 a6 a7][a8 a9]
  //   B  [a0 a1 a2 a3][a4 a5 a6 a7][a8 b9 ...]
  //   hit = 8 tokens (two full blocks); block 3 differs and A's tail is never keyed.
  KvCacheManager kv(cache_config(16));
  auto a = make_request(kv, "a", make_prompt(10));
  EXPECT_EQ(admit_whole(kv, *a), 0);
  auto prompt_b = make_prompt(14);
  prompt_b[9] = 42;
  auto b = make_request(kv, "b", prompt_b);
  EXPECT_EQ(admit_whole(kv, *b), 8);
  EXPECT_EQ(std::vector(b->block_ids().begin(), b->block_ids().begin() + 2),
            std::vector(a->block_ids().begin(), a->block_ids().begin() + 2));
  EXPECT_EQ(kv.block_pool().ref_count(a->block_ids()[0]), 2);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 10 + 14);
  EXPECT_EQ(kv.prefix_cache_stats().hits, 8);
  kv.block_pool().check_invariants();
}

TEST(KvCacheManagerTest, NeverHitsTheWholePrompt) {
  // The same 8-token prompt twice: both blocks are cached, but the last token must run again
  // to produce logits, so only the first block hits.
  KvCacheManager kv(cache_config(16));
  auto a = make_request(kv, "a", make_prompt(8));
  admit_whole(kv, *a);
  kv.free(*a);
  auto b = make_request(kv, "b", make_prompt(8));
  const ComputedBlocks hits = kv.get_computed_blocks(*b);
  EXPECT_EQ(hits.num_tokens, 4);
}

TEST(KvCacheManagerTest, DifferentSaltNeverHits) {
  KvCacheManager kv(cache_config(16));
  auto a = make_request(kv, "a", make_prompt(12), "tenant-1");
  admit_whole(kv, *a);
  auto b = make_request(kv, "b", make_prompt(12), "tenant-2");
  EXPECT_EQ(kv.get_computed_blocks(*b).num_tokens, 0);
  auto c = make_request(kv, "c", make_prompt(12), "tenant-1");
  EXPECT_EQ(kv.get_computed_blocks(*c).num_tokens, 8);
}

TEST(KvCacheManagerTest, FreedBlocksHitUntilReallocated) {
  KvCacheManager kv(cache_config(4));
  auto a = make_request(kv, "a", make_prompt(12));
  admit_whole(kv, *a);  // 3 blocks, 2 keyed... all 3 full: keyed
  kv.free(*a);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  auto b = make_request(kv, "b", make_prompt(12));
  EXPECT_EQ(kv.get_computed_blocks(*b).num_tokens, 8);
  // Another prompt takes every block: the free queue is drained, every key evicted.
  auto c = make_request(kv, "c", make_prompt(16, 9000));
  admit_whole(kv, *c);
  EXPECT_EQ(kv.get_computed_blocks(*b).num_tokens, 0);
}

TEST(KvCacheManagerTest, TailBlocksAreEvictedBeforeHeadBlocks) {
  // Freed in reverse, A's LRU order is [blk2, blk1, blk0]: reusing one block costs A's
  // deepest block and keeps the head of its prefix, which more requests share.
  KvCacheManager kv(cache_config(3));
  auto a = make_request(kv, "a", make_prompt(12));
  admit_whole(kv, *a);
  const std::vector<std::int32_t> table = a->block_ids();
  kv.free(*a);
  EXPECT_EQ(kv.block_pool().free_queue(),
            (std::vector<std::int32_t>{table[2], table[1], table[0]}));
  auto c = make_request(kv, "c", make_prompt(2, 9000));
  admit_whole(kv, *c);  // takes table[2]
  auto b = make_request(kv, "b", make_prompt(13));
  EXPECT_EQ(kv.get_computed_blocks(*b).num_tokens, 8);
}

TEST(KvCacheManagerTest, HitsOnFreeBlocksCountAgainstCapacity) {
  KvCacheManager kv(cache_config(3));
  auto a = make_request(kv, "a", make_prompt(8));
  admit_whole(kv, *a);
  kv.free(*a);  // 2 keyed free blocks + 1 plain
  auto b = make_request(kv, "b", make_prompt(16));
  const ComputedBlocks hits = kv.get_computed_blocks(*b);
  ASSERT_EQ(hits.num_tokens, 8);
  // Needs 2 more blocks but reviving the 2 hits leaves only 1 free.
  EXPECT_FALSE(kv.allocate_slots(*b, 8, hits).has_value());
  EXPECT_TRUE(kv.allocate_slots(*b, 4, hits).has_value());
  EXPECT_EQ(b->num_computed_tokens(), 8);
  kv.block_pool().check_invariants();
}

TEST(KvCacheManagerTest, ForkSharesFullBlocksOnly) {
  // Parent computed 10 prompt tokens: [p0..p3][p4..p7][p8 p9]. The child shares the two full
  // blocks and recomputes p8 p9 in a block of its own (partial blocks are never shared).
  CacheConfig config = cache_config(8);
  config.enable_prefix_caching = false;  // fork works without the prefix cache
  KvCacheManager kv(config);
  auto parent = make_request(kv, "p", make_prompt(10));
  admit_whole(kv, *parent);
  auto child = make_request(kv, "p#1", make_prompt(10));
  EXPECT_EQ(kv.fork(*parent, *child), 8);
  EXPECT_EQ(child->num_computed_tokens(), 8);
  EXPECT_EQ(kv.block_pool().ref_count(parent->block_ids()[0]), 2);
  const auto more = kv.allocate_slots(*child, 2);
  ASSERT_TRUE(more.has_value());
  EXPECT_NE((*more)[0], parent->block_ids()[2]);
  kv.free(*parent);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 3);
  kv.free(*child);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  kv.block_pool().check_invariants();
}

TEST(KvCacheManagerTest, UsageReturnsToResidueOnly) {
  KvCacheManager kv(cache_config(16));
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) {
    requests.push_back(make_request(kv, "r" + std::to_string(i), make_prompt(9 + i)));
    admit_whole(kv, *requests.back());
  }
  for (auto& r : requests) kv.free(*r);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  EXPECT_DOUBLE_EQ(kv.usage(), 0.0);
  EXPECT_GT(kv.block_pool().num_cached_blocks(), 0);  // the prefix-cache residue
  kv.block_pool().check_invariants();
}

}  // namespace
}  // namespace pagoda::engine
