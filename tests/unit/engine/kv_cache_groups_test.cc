// KV groups (kv_cache_manager.h): a full group and a sliding-window group, each with its own
// tables, sharing one pool. block_size 4, window 6: a query at position p reads keys p-5 .. p,
// so the sliding table keeps blocks from (p - 5) / 4 on.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/kv_cache_sizing.h"
#include "engine/scheduler.h"
#include "scheduler_test_util.h"

namespace pagoda::engine {
namespace {

using testing::make_prompt;

constexpr std::int64_t kBlockSize = 4;
constexpr std::int64_t kWindow = 6;

CacheConfig two_groups(std::int64_t num_blocks) {
  CacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = kBlockSize;
  c.sliding_windows = {kWindow};
  return c;
}

std::unique_ptr<Request> make_kv_request(const KvCacheManager& kv, const std::string& id,
                                         std::vector<std::int32_t> prompt) {
  auto r = std::make_unique<Request>(id, std::move(prompt), RequestOptions{});
  kv.update_block_hashes(*r);
  return r;
}

// Decodes one token the way the scheduler and update_from_output do.
void decode_one(KvCacheManager& kv, Request& r) {
  ASSERT_TRUE(kv.allocate_slots(r, 1).has_value());
  r.set_num_computed_tokens(r.num_tokens());
  r.append_output_token(7);
  kv.update_block_hashes(r);
}

void check_pool(const KvCacheManager& kv) {
  kv.block_pool().check_invariants();
}

TEST(KvCacheGroupsTest, FirstWindowBlockFollowsTheWindow) {
  KvCacheManager kv(two_groups(32));
  EXPECT_EQ(kv.first_window_block(0, 100), 0);  // full layers read everything
  EXPECT_EQ(kv.first_window_block(1, 5), 0);    // keys 0..5
  EXPECT_EQ(kv.first_window_block(1, 8), 0);    // keys 3..8
  EXPECT_EQ(kv.first_window_block(1, 9), 1);    // keys 4..9
  EXPECT_EQ(kv.first_window_block(1, 13), 2);   // keys 8..13
}

TEST(KvCacheGroupsTest, TablesGrowInStepAndTheSlidingOneFreesBehindTheWindow) {
  KvCacheManager kv(two_groups(32));
  auto r = make_kv_request(kv, "a", make_prompt(10));
  // Prefill 10 tokens: 3 blocks in each group (the window of the chunk's first query, 0, is
  // everything before it).
  ASSERT_TRUE(kv.allocate_slots(*r, 10).has_value());
  r->set_num_computed_tokens(10);
  EXPECT_EQ(r->block_ids(0).size(), 3u);
  EXPECT_EQ(r->block_ids(1).size(), 3u);
  EXPECT_EQ(kv.num_held_blocks(*r, 1), 3);
  r->append_output_token(7);
  kv.update_block_hashes(*r);
  //   decode at 10: keys 5..10, blocks 1..2 -> block 0 freed
  decode_one(kv, *r);
  EXPECT_EQ(r->block_ids(1)[0], -1);
  EXPECT_EQ(kv.num_held_blocks(*r, 1), 2);
  EXPECT_EQ(kv.num_held_blocks(*r, 0), 3);
  // Run to 40 tokens: the full table holds 10 blocks, the sliding one never more than 3.
  while (r->num_tokens() < 40) {
    decode_one(kv, *r);
    EXPECT_LE(kv.num_held_blocks(*r, 1), 3) << "at " << r->num_tokens();
    ASSERT_EQ(r->block_ids(1).size(), r->block_ids(0).size());
  }
  EXPECT_EQ(kv.num_held_blocks(*r, 0), 10);
  EXPECT_EQ(kv.block_pool().num_used_blocks(),
            kv.num_held_blocks(*r, 0) + kv.num_held_blocks(*r, 1));
  // Every held sliding entry is at or after the window of the next query.
  const std::int64_t first = kv.first_window_block(1, r->num_computed_tokens());
  for (std::int64_t i = 0; i < std::ssize(r->block_ids(1)); ++i) {
    EXPECT_EQ(r->block_ids(1)[i] >= 0, i >= first) << "entry " << i;
  }
  kv.free(*r);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

TEST(KvCacheGroupsTest, AChunkLongerThanTheWindowNeedsAllItsBlocksForItsStep) {
  // A 24-token chunk writes every position's K/V before attention reads, so the sliding group
  // needs all 6 of its blocks in that step (12 of the pool's 16 with group 0's); the next step
  // frees those behind the window.
  KvCacheManager kv(two_groups(16));
  auto r = make_kv_request(kv, "a", make_prompt(25));
  ASSERT_TRUE(kv.allocate_slots(*r, 24).has_value());
  EXPECT_EQ(kv.num_held_blocks(*r, 1), 6);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 12);
  r->set_num_computed_tokens(24);
  ASSERT_TRUE(kv.allocate_slots(*r, 1).has_value());  // query 24: keys 19..24, blocks 4..6
  EXPECT_EQ(kv.num_held_blocks(*r, 1), 3);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 7 + 3);
  check_pool(kv);
}

TEST(KvCacheGroupsTest, AllOrNothingAcrossGroups) {
  // 12 tokens need 3 blocks in each group, 6 of a pool of 5: nothing is taken from either.
  KvCacheManager kv(two_groups(5));
  auto r = make_kv_request(kv, "a", make_prompt(12));
  EXPECT_FALSE(kv.allocate_slots(*r, 12).has_value());
  EXPECT_TRUE(r->block_ids(0).empty());
  EXPECT_TRUE(r->block_ids(1).empty());
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  EXPECT_TRUE(kv.allocate_slots(*r, 8).has_value());  // a chunk that fits both
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 4);
  check_pool(kv);
}

TEST(KvCacheGroupsTest, DraftSlotsAreAllocatedAndARollbackNeverNeedsAFreedBlock) {
  KvCacheManager kv(two_groups(32));
  auto r = make_kv_request(kv, "a", make_prompt(15));
  ASSERT_TRUE(kv.allocate_slots(*r, 15).has_value());
  r->set_num_computed_tokens(15);
  r->append_output_token(7);  // 16 tokens, 15 computed
  kv.update_block_hashes(*r);
  // Last token at 15 plus 4 drafts at 16..19: blocks through 4; query 15 reads keys 10..15.
  ASSERT_TRUE(kv.allocate_slots(*r, 1, {}, /*num_lookahead_tokens=*/4).has_value());
  EXPECT_EQ(r->block_ids(1).size(), 5u);
  EXPECT_EQ(r->block_ids(1)[1], -1);
  EXPECT_GE(r->block_ids(1)[2], 0);
  // One draft accepted: 18 tokens, 17 computed. A rollback never goes below the 15 this step
  // started at, so the blocks it kept are all the next step could need; that step starts at 17
  // (keys 12..17, from block 3) and frees block 2.
  r->set_num_computed_tokens(16);
  r->append_output_token(8);
  r->append_output_token(9);
  r->set_num_computed_tokens(17);
  kv.update_block_hashes(*r);
  ASSERT_TRUE(kv.allocate_slots(*r, 1).has_value());
  EXPECT_GE(r->block_ids(1)[3], 0);
  EXPECT_EQ(r->block_ids(1)[2], -1);  // keys 12..17 start in block 3
  check_pool(kv);
}

TEST(KvCacheGroupsTest, PrefixHitTakesTheWindowBlocksOnly) {
  KvCacheManager kv(two_groups(64));
  const auto prompt = make_prompt(21);
  auto a = make_kv_request(kv, "a", prompt);
  ASSERT_TRUE(kv.allocate_slots(*a, 21).has_value());
  a->set_num_computed_tokens(21);
  // While `a` still holds all of its blocks, `b` (same prompt) hits 5 blocks (20 tokens; never
  // its last token): group 0 blocks 0..4, the sliding group only the blocks that position 20's
  // window (keys 15..20) reads before the hit's end: block 3..4.
  auto b = make_kv_request(kv, "b", prompt);
  const ComputedBlocks hit = kv.get_computed_blocks(*b);
  EXPECT_EQ(hit.num_tokens, 20);
  ASSERT_EQ(hit.window_block_ids.size(), 1u);
  EXPECT_EQ(hit.window_block_ids[0],
            (std::vector<std::int32_t>{a->block_ids(1)[3], a->block_ids(1)[4]}));
  ASSERT_TRUE(kv.allocate_slots(*b, 1, hit).has_value());
  EXPECT_EQ(b->num_computed_tokens(), 20);
  EXPECT_EQ(b->block_ids(1)[0], -1);
  EXPECT_EQ(b->block_ids(1)[2], -1);
  EXPECT_EQ(b->block_ids(1)[3], a->block_ids(1)[3]);
  EXPECT_EQ(kv.block_pool().ref_count(a->block_ids(1)[4]), 2);
  EXPECT_EQ(kv.prefix_cache_stats().hits, 20);
  kv.free(*a);
  kv.free(*b);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

// `a` (a 17-token prompt) decodes to 33 tokens; its sliding group frees the prompt's blocks as
// the window passes them, keyed, into the free queue. In a roomy pool they stay cached and `b`
// (the same prompt) hits 16 tokens, taking blocks 2..3 (the window of position 16, keys
// 11..16). In a pool of 12, `a`'s own growth (group 0's blocks and the sliding ones) takes them
// back from the free queue, and no hit length has its window left (16 needs blocks 2..3, 12
// needs 1..2, 8 needs 0..1, 4 needs 0), although group 0 alone still has all 4.
class PrefixHitWindowTest : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(PrefixHitWindowTest, HitNeedsTheWindowInEveryGroup) {
  const std::int64_t pool = GetParam();
  KvCacheManager kv(two_groups(pool));
  const auto prompt = make_prompt(17);
  auto a = make_kv_request(kv, "a", prompt);
  ASSERT_TRUE(kv.allocate_slots(*a, 17).has_value());
  a->set_num_computed_tokens(17);
  a->append_output_token(7);
  kv.update_block_hashes(*a);
  while (a->num_tokens() < 33) decode_one(kv, *a);
  auto b = make_kv_request(kv, "b", prompt);
  const ComputedBlocks hit = kv.get_computed_blocks(*b);
  if (pool > 12) {
    EXPECT_EQ(hit.num_tokens, 16);
    ASSERT_EQ(hit.window_block_ids.size(), 1u);
    EXPECT_EQ(hit.window_block_ids[0].size(), 2u);
  } else {
    EXPECT_EQ(hit.num_tokens, 0);
  }
  // Whatever the hit, every block its window reads is cached in the sliding group.
  for (std::int64_t i = kv.first_window_block(1, hit.num_tokens); i < hit.num_tokens / kBlockSize;
       ++i) {
    EXPECT_TRUE(kv.block_pool()
                    .get_cached_block(KvCacheManager::group_key(b->block_hashes()[i], 1))
                    .has_value())
        << i;
  }
  kv.free(*a);  // its hit blocks stay cached, and the small pool has room for `b`
  ASSERT_TRUE(kv.allocate_slots(*b, b->num_tokens() - hit.num_tokens, hit).has_value());
  EXPECT_EQ(b->num_computed_tokens(), hit.num_tokens);
  kv.free(*b);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

INSTANTIATE_TEST_SUITE_P(Pool, PrefixHitWindowTest, ::testing::Values(64, 12));

TEST(KvCacheGroupsTest, ForkSharesTheWindowOrNothing) {
  KvCacheManager kv(two_groups(64));
  const auto prompt = make_prompt(21);
  auto parent = make_kv_request(kv, "p", prompt);
  ASSERT_TRUE(kv.allocate_slots(*parent, 21).has_value());
  parent->set_num_computed_tokens(21);
  // 5 shared blocks (20 tokens): group 0's 0..4, the sliding group's 3..4 (keys 15..20).
  auto child = make_kv_request(kv, "c", prompt);
  EXPECT_EQ(kv.fork(*parent, *child), 20);
  EXPECT_EQ(child->block_ids(0), std::vector<std::int32_t>(parent->block_ids(0).begin(),
                                                           parent->block_ids(0).begin() + 5));
  EXPECT_EQ(child->block_ids(1), (std::vector<std::int32_t>{-1, -1, -1, parent->block_ids(1)[3],
                                                            parent->block_ids(1)[4]}));
  EXPECT_EQ(kv.block_pool().ref_count(parent->block_ids(1)[4]), 2);
  kv.free(*child);
  // Once the parent's window has moved past them, a fork would need blocks it freed: none.
  parent->append_output_token(7);
  kv.update_block_hashes(*parent);
  while (parent->num_tokens() < 40) decode_one(kv, *parent);
  auto late = make_kv_request(kv, "l", prompt);
  EXPECT_EQ(kv.fork(*parent, *late), 0);
  EXPECT_TRUE(late->block_ids(0).empty());
  kv.free(*parent);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

TEST(KvCacheGroupsTest, SizingCountsPagesOfAGroupsLayers) {
  // Gemma 3 270M's shape: 18 layers, every 6th full (3), the 15 sliding ones in 5 groups of 3,
  // window 512; 1 KV head of 256, bf16. A block of the shared pool is a page of 3 layers.
  ModelExecutorInfo info;
  info.num_layers = 18;
  info.num_kv_heads = 1;
  info.head_dim = 256;
  info.kv_group_windows = {0, 512, 512, 512, 512, 512};
  for (int i = 0, sliding = 0; i < 18; ++i) {
    info.kv_group_of_layer.push_back(i % 6 == 5 ? 0 : 1 + sliding++ / 3);
  }
  const std::int64_t per_block = kv_block_bytes(info, 16, 2);  // 18 layers
  EXPECT_EQ(kv_page_bytes(info, per_block, false), per_block / 6);
  const KvSizingLimits limits{
      .block_size = 16, .max_model_len = 32768, .max_num_seqs = 4, .max_num_batched_tokens = 2048};
  const std::int64_t budget = std::int64_t{4} << 30;
  CacheConfig cache;
  size_kv_groups(budget, per_block, info, limits, cache);
  EXPECT_EQ(cache.sliding_windows, (std::vector<std::int64_t>(5, 512)));
  EXPECT_EQ(cache.num_blocks, budget / (per_block / 6));
  // One 32k request: 2,048 full blocks, and per sliding group its window (ceil(511 / 16) + 1 =
  // 33 blocks) beside one step's 2,048 tokens (128): 2,048 + 5 x 161.
  EXPECT_EQ(kv_blocks_per_request(cache, 32768, 2048), 2048 + 5 * 161);
  SchedulerConfig sched{.max_num_batched_tokens = 2048, .max_num_seqs = 4, .max_model_len = 32768};
  EXPECT_TRUE(sched.validate(cache).ok());
  CacheConfig single;
  size_kv_groups(budget, per_block, info, {.block_size = 16, .single_group = true}, single);
  EXPECT_TRUE(single.sliding_windows.empty());
  EXPECT_EQ(single.num_blocks, budget / per_block);
}

// The scheduler over two groups: the fake runner checks group 0's tables and cache contents;
// here every step also checks the sliding tables against the window rule, and the pools return
// to the prefix-cache residue when requests end, are aborted or preempted.
std::unique_ptr<Scheduler> two_group_scheduler(std::int64_t num_blocks,
                                               std::int64_t max_model_len = 64) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 16;
  config.max_num_seqs = 8;
  config.max_model_len = max_model_len;
  return std::make_unique<Scheduler>(config, two_groups(num_blocks));
}

void check_windows(const Scheduler& scheduler) {
  const KvCacheManager& kv = scheduler.kv_cache_manager();
  for (std::size_t i = 0; i < scheduler.running().size(); ++i) {
    const Request& r = *scheduler.running()[i];
    ASSERT_EQ(r.block_ids(1).size(), r.block_ids(0).size()) << r.request_id();
    // Held sliding blocks: at most the window's plus the last step's chunk.
    EXPECT_LE(kv.num_held_blocks(r, 1), (kWindow - 1 + 16 + kBlockSize - 1) / kBlockSize + 2)
        << r.request_id();
  }
}

TEST(KvCacheGroupsSchedulerTest, LongRequestsRunToTheSameTokensWithFewSlidingBlocks) {
  auto scheduler = two_group_scheduler(88);
  testing::FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(testing::make_request("A", make_prompt(30, 1000), 30)).ok());
  ASSERT_TRUE(scheduler->add_request(testing::make_request("B", make_prompt(20, 2000), 40)).ok());
  std::map<std::string, std::vector<std::int32_t>> outputs;
  std::int64_t max_sliding_used = 0;
  for (int step = 0; step < 500 && scheduler->has_unfinished_requests(); ++step) {
    std::vector<RequestUpdate> updates;
    runner.step(*scheduler, &updates);
    for (const RequestUpdate& u : updates) {
      outputs[u.request_id].insert(outputs[u.request_id].end(), u.new_token_ids.begin(),
                                   u.new_token_ids.end());
    }
    check_windows(*scheduler);
    std::int64_t sliding = 0;
    for (std::size_t i = 0; i < scheduler->running().size(); ++i) {
      sliding += scheduler->kv_cache_manager().num_held_blocks(*scheduler->running()[i], 1);
    }
    max_sliding_used = std::max(max_sliding_used, sliding);
  }
  EXPECT_EQ(outputs["A"], testing::expected_output(make_prompt(30, 1000), 30));
  EXPECT_EQ(outputs["B"], testing::expected_output(make_prompt(20, 2000), 40));
  EXPECT_LE(max_sliding_used, 2 * 7);  // 60 tokens each would be 15 blocks each in one table
  // Only the prefix-cache residue is left: every block free.
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
}

TEST(KvCacheGroupsSchedulerTest, AbortFreesEveryGroup) {
  auto scheduler = two_group_scheduler(88);
  testing::FakeModelRunner runner(*scheduler);
  ASSERT_TRUE(scheduler->add_request(testing::make_request("A", make_prompt(30), 20)).ok());
  for (int step = 0; step < 6; ++step) runner.step(*scheduler);
  const KvCacheManager& kv = scheduler->kv_cache_manager();
  const Request& a = *scheduler->find_request("A");
  EXPECT_GT(kv.num_held_blocks(a, 0), 0);
  EXPECT_GT(kv.num_held_blocks(a, 1), 0);
  EXPECT_LT(kv.num_held_blocks(a, 1), kv.num_held_blocks(a, 0));
  ASSERT_TRUE(scheduler->abort_request("A"));
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

TEST(KvCacheGroupsSchedulerTest, APoolRunningDryPreemptsAndTheRequestsStillFinish) {
  // A pool of 15 blocks, the least one 32-token request needs (8 full blocks, and a window of 2
  // beside a step of 16 tokens: 7 sliding ones). Three 5-token prompts are admitted in step 1 (2
  // blocks in each group each: 12). At position 8 each needs a third block in both groups while
  // its window (keys 3..8) still reads block 0: A takes 2 (14), B cannot, and C, the newest, is
  // preempted for it, as when group 0 alone runs dry. Every request still produces its tokens.
  //   step    1     2..4    5              6 ..
  //   A B C   P5    D       D D X          ... C waits, resumes when A or B is done
  auto scheduler = two_group_scheduler(15, /*max_model_len=*/32);
  testing::FakeModelRunner runner(*scheduler);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(scheduler
                    ->add_request(testing::make_request(std::string(1, static_cast<char>('A' + i)),
                                                        make_prompt(5, 1000 + 100 * i), 20))
                    .ok());
  }
  const auto outputs = testing::run_to_completion(*scheduler, runner);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outputs.at(std::string(1, static_cast<char>('A' + i))),
              testing::expected_output(make_prompt(5, 1000 + 100 * i), 20));
  }
  EXPECT_GT(scheduler->stats().num_preemptions, 0);
  const KvCacheManager& kv = scheduler->kv_cache_manager();
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  check_pool(kv);
}

}  // namespace
}  // namespace pagoda::engine
