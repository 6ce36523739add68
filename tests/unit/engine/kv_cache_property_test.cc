// Randomized, seeded property tests of the KV-cache manager and of the scheduler on top of it.
// A shadow copy of the cache (the token id each slot holds) proves that every prefix hit and
// every fork hands out K/V that really belongs to the request's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "scheduler_test_util.h"

namespace pagoda::engine {
namespace {

using testing::expected_output;
using testing::FakeModelRunner;
using testing::make_scheduler;
using testing::TestLimits;

// Prompts built from a few shared stems so that prefixes repeat, plus a random tail.
class PromptSource {
 public:
  explicit PromptSource(std::mt19937_64& rng) : rng_(rng) {
    for (int s = 0; s < 4; ++s) {
      std::vector<std::int32_t> stem(static_cast<std::size_t>(8 + 13 * s));
      for (auto& t : stem) t = token();
      stems_.push_back(std::move(stem));
    }
  }
  std::vector<std::int32_t> next(std::int64_t max_len) {
    std::vector<std::int32_t> prompt = stems_[pick(stems_.size())];
    const std::int64_t tail = 1 + static_cast<std::int64_t>(pick(24));
    for (std::int64_t i = 0; i < tail; ++i) prompt.push_back(token());
    if (static_cast<std::int64_t>(prompt.size()) > max_len) prompt.resize(max_len);
    return prompt;
  }
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  std::int32_t token() { return 1000 + static_cast<std::int32_t>(pick(50)); }

 private:
  std::mt19937_64& rng_;
  std::vector<std::vector<std::int32_t>> stems_;
};

// Ref counts must equal the number of live requests holding each block; free + used == total.
void check_ref_counts(const KvCacheManager& kv, const std::vector<const Request*>& live) {
  const BlockPool& pool = kv.block_pool();
  pool.check_invariants();
  std::vector<std::int32_t> holders(pool.num_blocks(), 0);
  for (const Request* r : live) {
    for (const std::int32_t id : r->block_ids()) ++holders[id];
  }
  std::int32_t used = 0;
  for (std::int32_t id = 0; id < pool.num_blocks(); ++id) {
    ASSERT_EQ(pool.ref_count(id), holders[id]) << "block " << id;
    used += holders[id] > 0;
  }
  ASSERT_EQ(pool.num_used_blocks(), used);
  ASSERT_EQ(pool.num_free_blocks() + pool.num_used_blocks(), pool.num_blocks());
}

class KvCacheRandomTest : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(KvCacheRandomTest, InvariantsHoldOverManyOperations) {
  constexpr std::int64_t kBlockSize = 4;
  constexpr std::int64_t kNumBlocks = 48;
  constexpr std::int64_t kMaxLen = 96;
  constexpr int kOps = 12000;
  std::mt19937_64 rng(GetParam());
  PromptSource prompts(rng);
  CacheConfig config;
  config.num_blocks = kNumBlocks;
  config.block_size = kBlockSize;
  KvCacheManager kv(config);
  std::vector<std::int32_t> slots(kNumBlocks * kBlockSize, -1);  // shadow K/V: token ids
  auto slot = [&](const Request& r, std::int64_t p) {
    return r.block_ids()[p / kBlockSize] * kBlockSize + p % kBlockSize;
  };
  auto verify_context = [&](const Request& r, std::int64_t n) {
    for (std::int64_t p = 0; p < n; ++p) {
      ASSERT_EQ(slots[slot(r, p)], r.token_ids()[p]) << r.request_id() << " position " << p;
    }
  };
  std::vector<std::unique_ptr<Request>> waiting;
  std::vector<std::unique_ptr<Request>> running;
  int next_id = 0;
  std::int64_t num_hits = 0;
  std::int64_t num_forks = 0;
  std::int64_t num_failures = 0;

  // Computes a chunk: allocate, then "write" the tokens into the shadow cache.
  auto run_chunk = [&](Request& r, const ComputedBlocks& hits) {
    const std::int64_t start = r.num_computed_tokens() + hits.num_tokens;
    const std::int64_t left = r.num_tokens() - start;
    const std::int64_t n = 1 + static_cast<std::int64_t>(prompts.pick(left));
    const std::size_t free_before = kv.block_pool().num_free_blocks();
    const std::size_t table_before = r.block_ids().size();
    if (!kv.allocate_slots(r, n, hits)) {
      ++num_failures;
      EXPECT_EQ(kv.block_pool().num_free_blocks(), free_before);  // all or nothing
      EXPECT_EQ(r.block_ids().size(), table_before);
      return false;
    }
    if (hits.num_tokens > 0) {
      ++num_hits;
      EXPECT_EQ(hits.num_tokens % kBlockSize, 0);
      EXPECT_LT(hits.num_tokens, r.num_tokens());  // never the whole sequence
      verify_context(r, hits.num_tokens);
    }
    for (std::int64_t p = start; p < start + n; ++p) slots[slot(r, p)] = r.token_ids()[p];
    r.set_num_computed_tokens(start + n);
    return true;
  };
  auto release = [&](std::vector<std::unique_ptr<Request>>& from, std::size_t i) {
    kv.free(*from[i]);
    from.erase(from.begin() + static_cast<std::ptrdiff_t>(i));
  };

  for (int op = 0; op < kOps; ++op) {
    const std::size_t kind = prompts.pick(100);
    if (kind < 12 && waiting.size() + running.size() < 24) {  // add
      RequestOptions options;
      if (prompts.pick(8) == 0) options.cache_salt = "tenant-b";
      waiting.push_back(std::make_unique<Request>("r" + std::to_string(next_id++),
                                                  prompts.next(kMaxLen - 8), options));
      kv.update_block_hashes(*waiting.back());
    } else if (kind < 30 && !waiting.empty()) {  // admit the oldest waiting request
      Request& r = *waiting.front();
      if (run_chunk(r, kv.get_computed_blocks(r))) {
        running.push_back(std::move(waiting.front()));
        waiting.erase(waiting.begin());
      }
    } else if (kind < 75 && !running.empty()) {  // a step for one running request
      Request& r = *running[prompts.pick(running.size())];
      if (r.num_computed_tokens() < r.num_tokens()) {
        run_chunk(r, {});
      } else if (r.num_tokens() < kMaxLen) {
        r.append_output_token(prompts.token());
        kv.update_block_hashes(r);
      }
    } else if (kind < 82 && !running.empty()) {  // finish
      release(running, prompts.pick(running.size()));
    } else if (kind < 88 && !running.empty()) {  // preempt: recompute later
      const std::size_t i = prompts.pick(running.size());
      kv.free(*running[i]);
      running[i]->set_num_computed_tokens(0);
      waiting.insert(waiting.begin(), std::move(running[i]));
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (kind < 94 && !running.empty()) {  // fork a sibling (n > 1)
      const Request& parent = *running[prompts.pick(running.size())];
      const auto prompt = parent.prompt_token_ids();
      auto child =
          std::make_unique<Request>("r" + std::to_string(next_id++),
                                    std::vector(prompt.begin(), prompt.end()), parent.options());
      kv.update_block_hashes(*child);
      const std::int64_t shared = kv.fork(parent, *child);
      EXPECT_LT(shared, child->num_tokens());
      if (shared > 0) {
        ++num_forks;
        verify_context(*child, shared);
      }
      running.push_back(std::move(child));
    } else if (kind < 100) {  // abort anything
      if (!waiting.empty() && prompts.pick(2) == 0) {
        release(waiting, prompts.pick(waiting.size()));
      } else if (!running.empty()) {
        release(running, prompts.pick(running.size()));
      }
    }
    std::vector<const Request*> live;
    for (const auto& r : running) live.push_back(r.get());
    for (const auto& r : waiting) {
      ASSERT_TRUE(r->block_ids().empty());
      live.push_back(r.get());
    }
    ASSERT_NO_FATAL_FAILURE(check_ref_counts(kv, live)) << "after op " << op;
    if (HasFailure()) break;
  }
  // The run must have exercised the interesting paths, not just passed vacuously.
  EXPECT_GT(num_hits, 100);
  EXPECT_GT(num_forks, 50);
  EXPECT_GT(num_failures, 10);

  for (auto& r : running) kv.free(*r);
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0);
  EXPECT_EQ(kv.block_pool().num_free_blocks(), kNumBlocks);
  EXPECT_GT(kv.block_pool().num_cached_blocks(), 0);  // residue stays findable
  kv.block_pool().check_invariants();
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheRandomTest, ::testing::Values(1u, 2u, 3u));

TEST(KvCachePrefixPropertyTest, HitIsSharedPrefixRoundedDownNeverWholePrompt) {
  constexpr std::int64_t kBlockSize = 8;
  std::mt19937_64 rng(7);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 500; ++trial) {
    CacheConfig config;
    config.num_blocks = 64;
    config.block_size = kBlockSize;
    KvCacheManager kv(config);
    const std::int64_t len_x = uniform(1, 100);
    std::vector<std::int32_t> x(len_x);
    for (auto& t : x) t = static_cast<std::int32_t>(uniform(0, 30000));
    Request rx("x", x);
    kv.update_block_hashes(rx);
    ASSERT_TRUE(kv.allocate_slots(rx, len_x).has_value());
    rx.set_num_computed_tokens(len_x);
    if (trial % 2 == 0) kv.free(rx);  // free or still running: both must hit

    // y = x[0..k) + tokens that differ from x at position k.
    const std::int64_t k = uniform(0, len_x);
    std::vector<std::int32_t> y(x.begin(), x.begin() + k);
    const std::int64_t len_y =
        k == len_x && trial % 3 == 0 ? k : uniform(std::max<std::int64_t>(k, 1), k + 40);
    for (std::int64_t p = k; p < len_y; ++p) {
      y.push_back(p < len_x ? x[p] + 1 : static_cast<std::int32_t>(uniform(0, 30000)));
    }
    Request ry("y", y);
    kv.update_block_hashes(ry);
    const std::int64_t expected = std::min(k / kBlockSize, (len_y - 1) / kBlockSize) * kBlockSize;
    EXPECT_EQ(kv.get_computed_blocks(ry).num_tokens, expected)
        << "trial " << trial << ": len_x " << len_x << " k " << k << " len_y " << len_y;
  }
}

class SchedulerRandomTest : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(SchedulerRandomTest, EveryRequestMatchesTheModelAloneAndNothingLeaks) {
  // A tight pool (preemptions), a small budget (chunking), shared prefixes (hits), random
  // aborts. The fake runner checks cache contents every step; here we check the pool after
  // every operation and, at the end, every surviving output against the model run alone.
  std::mt19937_64 rng(GetParam());
  PromptSource prompts(rng);
  TestLimits limits;
  limits.num_blocks = 40;
  limits.block_size = 4;
  limits.max_model_len = 96;
  limits.max_num_batched_tokens = 48;
  limits.max_num_seqs = 8;
  limits.policy = GetParam() % 2 ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  auto scheduler = make_scheduler(limits);
  FakeModelRunner runner(*scheduler);
  std::map<std::string, std::vector<std::int32_t>> prompt_of;
  std::map<std::string, std::vector<std::int32_t>> output_of;
  std::map<std::string, RequestStatus> final_status;
  int next_id = 0;
  for (int op = 0; op < 3500; ++op) {
    const std::size_t kind = prompts.pick(100);
    if (kind < 15) {
      const std::string id = "q" + std::to_string(next_id++);
      RequestOptions options;
      options.priority = static_cast<std::int32_t>(prompts.pick(3));
      options.max_tokens = 1 + static_cast<std::int64_t>(prompts.pick(30));
      auto prompt = prompts.next(limits.max_model_len - *options.max_tokens);
      prompt_of[id] = prompt;
      ASSERT_TRUE(scheduler->add_request(std::make_unique<Request>(id, prompt, options)).ok());
    } else if (kind < 20 && next_id > 0) {
      const std::string id = "q" + std::to_string(prompts.pick(next_id));
      if (scheduler->abort_request(id)) final_status[id] = RequestStatus::kFinishedAborted;
    } else {
      std::vector<RequestUpdate> updates;
      const SchedulerOutput out = runner.step(*scheduler, &updates);
      ASSERT_LE(out.total_num_scheduled_tokens, limits.max_num_batched_tokens);
      ASSERT_LE(scheduler->stats().num_running, limits.max_num_seqs);
      for (const RequestUpdate& u : updates) {
        auto& tokens = output_of[u.request_id];
        tokens.insert(tokens.end(), u.new_token_ids.begin(), u.new_token_ids.end());
        if (u.finished()) final_status[u.request_id] = u.status;
      }
    }
    std::vector<const Request*> live;
    for (const Request* r : scheduler->running()) live.push_back(r);
    for (const Request* r : scheduler->waiting()) live.push_back(r);
    ASSERT_NO_FATAL_FAILURE(check_ref_counts(scheduler->kv_cache_manager(), live));
    if (HasFailure()) break;
  }
  const auto rest = testing::run_to_completion(*scheduler, runner);
  for (const auto& [id, tokens] : rest) {
    output_of[id].insert(output_of[id].end(), tokens.begin(), tokens.end());
  }
  EXPECT_FALSE(scheduler->has_unfinished_requests());
  EXPECT_EQ(scheduler->kv_cache_manager().block_pool().num_used_blocks(), 0);
  EXPECT_GT(scheduler->stats().num_preemptions, 0);
  EXPECT_GT(scheduler->stats().prefix_cache.hits, 0);
  for (const auto& [id, tokens] : output_of) {
    EXPECT_EQ(tokens, expected_output(prompt_of[id], static_cast<std::int64_t>(tokens.size())))
        << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerRandomTest, ::testing::Values(11u, 12u, 13u, 14u));

}  // namespace
}  // namespace pagoda::engine
