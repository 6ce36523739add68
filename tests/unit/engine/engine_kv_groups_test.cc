// Per-group KV tables on a real model: the tiny random Gemma 3 checkpoint (two sliding layers of
// window 12, one full layer: three KV groups of one layer each in one pool) runs long requests
// through the scheduler, the model runner and the CPU executor twice, once with KV groups and
// once with one table for every layer (--disable-hybrid-kv-cache-manager). The tokens must be
// identical; the sliding groups must hold a window's worth of blocks however long the requests
// grow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "engine/kv_cache_sizing.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "models/cpu_model_executor.h"

namespace pagoda::engine {
namespace {

const std::string kTinyGemma3 = std::string(PAGODA_TEST_DATA_DIR) + "/forward/tiny_gemma3";
constexpr std::int64_t kMaxModelLen = 4096;

struct RunResult {
  std::vector<std::vector<std::int32_t>> tokens;  // per request
  std::int64_t max_full_blocks = 0;     // group 0's blocks held by the running requests, at most
  std::int64_t max_sliding_blocks = 0;  // the same over the sliding groups (0 with one group)
  std::int64_t max_used_blocks = 0;     // the pool's, at most
  std::int64_t num_blocks = 0;          // the pool's size
  std::vector<std::int64_t> sliding_windows;
  std::int64_t num_preemptions = 0;
  std::int64_t num_accepted_drafts = 0;
};

// Serves `prompts` (greedy, `max_tokens` each) with a KV budget of `kv_bytes`, all in one engine
// loop: schedule, prepare, execute, update. With `reference` (another run's tokens), every
// decoding request carries drafts as a speculator would: the reference's next two tokens and a
// wrong third, verified greedily (two accepted, the third rejected and rolled back).
RunResult serve(const std::vector<std::vector<std::int32_t>>& prompts, std::int64_t max_tokens,
                std::int64_t kv_bytes, bool kv_groups,
                const std::vector<std::vector<std::int32_t>>* reference = nullptr) {
  RunResult result;
  auto files = open_model_files(kTinyGemma3);
  EXPECT_TRUE(files.ok()) << files.status().to_string();
  if (!files.ok()) return result;
  auto executor = models::CpuModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.num_threads = 2, .max_num_batched_tokens = 256, .max_model_len = kMaxModelLen});
  EXPECT_TRUE(executor.ok()) << executor.status().to_string();
  if (!executor.ok()) return result;
  models::CpuModelExecutor& model = **executor;
  EXPECT_EQ(model.info().num_kv_groups(), 3);

  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 256;
  config.scheduler.max_num_seqs = 4;
  config.scheduler.max_model_len = kMaxModelLen;
  config.cache.block_size = 16;
  config.kv_cache_memory_bytes = kv_bytes;
  config.disable_hybrid_kv_cache_manager = !kv_groups;
  auto resolved = resolve_engine_config(config, model);
  EXPECT_TRUE(resolved.ok()) << resolved.status().to_string();
  if (!resolved.ok()) return result;
  config = std::move(*resolved);
  result.num_blocks = config.cache.num_blocks;
  result.sliding_windows = config.cache.sliding_windows;
  EXPECT_EQ(config.cache.sliding_windows.size(), kv_groups ? 2u : 0u);
  Status s = kv_groups
                 ? model.allocate_kv_cache_groups(config.cache.num_blocks, config.cache.block_size)
                 : model.allocate_kv_cache(config.cache.num_blocks, config.cache.block_size);
  EXPECT_TRUE(s.ok()) << s.to_string();
  Scheduler scheduler(config.scheduler, config.cache);
  ModelRunner runner(model, config.cache.block_size, config.cache.sliding_windows);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    RequestOptions options;
    options.max_tokens = max_tokens;
    auto request = std::make_unique<Request>("r" + std::to_string(i), prompts[i], options);
    request->set_slot(static_cast<std::int32_t>(i));
    EXPECT_TRUE(model.open_sampling_slot(static_cast<std::int32_t>(i), {}).ok());
    EXPECT_TRUE(scheduler.add_request(std::move(request)).ok());
  }
  result.tokens.resize(prompts.size());
  const KvCacheManager& kv = scheduler.kv_cache_manager();
  for (int step = 0; step < 10000 && scheduler.has_unfinished_requests(); ++step) {
    for (std::size_t i = 0; reference != nullptr && i < scheduler.running().size(); ++i) {
      const Request& r = *scheduler.running()[i];
      const auto& want = (*reference)[static_cast<std::size_t>(r.slot())];
      const auto next = static_cast<std::size_t>(r.num_output_tokens());
      if (r.num_tokens() - r.num_computed_tokens() != 1 || next + 3 > want.size()) continue;
      scheduler.set_spec_token_ids(r.request_id(),
                                   {want[next], want[next + 1], (want[next + 2] + 1) % 416});
    }
    const SchedulerOutput out = scheduler.schedule();
    runner.prepare(out);
    s = runner.run();
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) break;
    std::int64_t full = 0, sliding = 0;
    for (std::size_t i = 0; i < scheduler.running().size(); ++i) {
      full += kv.num_held_blocks(*scheduler.running()[i], 0);
      for (std::size_t g = 1; g < kv.num_groups(); ++g) {
        sliding += kv.num_held_blocks(*scheduler.running()[i], g);
      }
    }
    result.max_full_blocks = std::max(result.max_full_blocks, full);
    result.max_sliding_blocks = std::max(result.max_sliding_blocks, sliding);
    result.max_used_blocks =
        std::max<std::int64_t>(result.max_used_blocks, kv.block_pool().num_used_blocks());
    SampledTokens sampled;
    for (std::size_t i = 0; i < out.requests.size(); ++i) {
      auto& tokens = sampled.token_ids.emplace_back();
      const std::int32_t row = runner.first_row(i);
      if (row < 0) continue;
      // Row j scores the token after draft j - 1: accept drafts while they match, then the
      // first token of the model's own.
      const ScheduledRequest& s = out.requests[i];
      const auto drafts = std::span(s.token_ids).last(static_cast<std::size_t>(s.num_spec_tokens));
      for (std::size_t j = 0;; ++j) {
        const std::int32_t token =
            runner.step_output().token_ids[static_cast<std::size_t>(row) + j];
        tokens.push_back(token);
        if (j == drafts.size() || token != drafts[j]) break;
      }
      result.num_accepted_drafts += static_cast<std::int64_t>(tokens.size()) - 1;
    }
    for (const RequestUpdate& u : scheduler.update_from_output(out, sampled)) {
      auto& tokens = result.tokens[static_cast<std::size_t>(u.slot)];
      tokens.insert(tokens.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
  }
  EXPECT_FALSE(scheduler.has_unfinished_requests());
  EXPECT_EQ(kv.block_pool().num_used_blocks(), 0) << "leaked blocks";
  kv.block_pool().check_invariants();
  result.num_preemptions = scheduler.stats().num_preemptions;
  return result;
}

std::vector<std::int32_t> random_prompt(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> id(3, 415);  // tiny_gemma3's vocabulary is 416
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n));
  for (auto& t : prompt) t = id(rng);
  return prompt;
}

TEST(EngineKvGroupsTest, LongGemma3RequestsHoldAWindowAndMatchOneTable) {
  // Two requests of 3,000 and 2,000 prompt tokens, chunked at 256 per step, 40 greedy tokens
  // each. A generous budget, so neither run preempts and both see the same schedule.
  const std::vector<std::vector<std::int32_t>> prompts = {random_prompt(3000, 1),
                                                          random_prompt(2000, 2)};
  constexpr std::int64_t kBudget = std::int64_t{64} << 20;
  const RunResult grouped = serve(prompts, 40, kBudget, /*kv_groups=*/true);
  const RunResult single = serve(prompts, 40, kBudget, /*kv_groups=*/false);
  ASSERT_EQ(grouped.tokens.size(), 2u);
  EXPECT_EQ(grouped.tokens[0].size(), 40u);
  EXPECT_EQ(grouped.tokens, single.tokens);

  // One table: a block holds every layer's K/V, and every token has one (3,040 tokens = 190
  // blocks for the first request alone). Groups: the full layer's table the same, each sliding
  // layer's only its window (12 tokens) beside the step's chunk of up to 256 tokens, at most
  // ceil((11 + 256) / 16) + 1 = 18 blocks per request and group however long the requests grow,
  // and a block is a third of one-table block's bytes.
  EXPECT_GE(single.max_full_blocks, 190);
  EXPECT_EQ(grouped.max_full_blocks, single.max_full_blocks);
  EXPECT_LE(grouped.max_sliding_blocks, 2 * 2 * 18);
  const double grouped_bytes = static_cast<double>(grouped.max_used_blocks) / 3.0;
  std::printf(
      "blocks held at the peak: one table %lld (3 layers each); groups %lld full + %lld "
      "sliding (1 layer each): %.1f%% of one table's KV bytes\n",
      static_cast<long long>(single.max_used_blocks),
      static_cast<long long>(grouped.max_full_blocks),
      static_cast<long long>(grouped.max_sliding_blocks),
      100.0 * grouped_bytes / static_cast<double>(single.max_used_blocks));
  EXPECT_LT(grouped_bytes, 0.5 * static_cast<double>(single.max_used_blocks));
  // The same budget holds 3x the blocks with groups, each a third of the bytes (up to rounding).
  EXPECT_GE(grouped.num_blocks, 3 * single.num_blocks);
  EXPECT_LT(grouped.num_blocks, 3 * single.num_blocks + 3);
}

TEST(EngineKvGroupsTest, TightPoolPreemptsAndStillMatches) {
  // The least pool the engine accepts for one max_model_len request: 256 full blocks and 2 x 18
  // sliding ones, 292 blocks of 32 KiB (one fp32 layer). Three requests of 4,500 prompt tokens in
  // all (287 full blocks) wait and preempt for blocks, and the tokens are still those of one
  // table.
  const std::vector<std::vector<std::int32_t>> prompts = {
      random_prompt(1500, 3), random_prompt(1200, 4), random_prompt(1800, 5)};
  const RunResult single = serve(prompts, 24, std::int64_t{64} << 20, /*kv_groups=*/false);
  const RunResult grouped = serve(prompts, 24, 292 * 32768, /*kv_groups=*/true);
  EXPECT_EQ(grouped.sliding_windows, (std::vector<std::int64_t>{12, 12}));
  EXPECT_EQ(grouped.num_blocks, 292);
  EXPECT_GT(grouped.num_preemptions, 0);
  EXPECT_EQ(single.num_preemptions, 0);
  EXPECT_EQ(grouped.tokens, single.tokens);
}

TEST(EngineKvGroupsTest, DraftsAndRollbacksKeepTheWindow) {
  // Speculative steps on the sliding groups: lookahead slots past the last token, two drafts
  // accepted and one rolled back every step. The tokens are those of one table without drafts.
  const std::vector<std::vector<std::int32_t>> prompts = {random_prompt(700, 6),
                                                          random_prompt(450, 7)};
  constexpr std::int64_t kBudget = std::int64_t{64} << 20;
  const RunResult single = serve(prompts, 48, kBudget, /*kv_groups=*/false);
  const RunResult drafted = serve(prompts, 48, kBudget, /*kv_groups=*/true, &single.tokens);
  EXPECT_GT(drafted.num_accepted_drafts, 20);
  EXPECT_EQ(drafted.tokens, single.tokens);
}

TEST(EngineKvGroupsTest, ADraftModelsPoolComesOutOfTheBudget) {
  // The draft gets as many blocks as the target: with KV groups the target's blocks are a third
  // of a one-table block here, so the draft's are counted in the budget rather than tripling
  // the draft's memory beside it. The draft keeps KV groups too (draft_model_proposer.h), so
  // its block is a page of one layer (32 KiB in fp32), as the target's.
  const auto open = [] {
    auto files = open_model_files(kTinyGemma3);
    EXPECT_TRUE(files.ok());
    auto executor = models::CpuModelExecutor::create(
        std::make_shared<const ModelFiles>(std::move(*files)),
        {.num_threads = 1, .max_num_batched_tokens = 256, .max_model_len = 512});
    EXPECT_TRUE(executor.ok());
    return std::move(*executor);
  };
  auto target = open();
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 256;
  config.scheduler.max_model_len = 512;
  config.kv_cache_memory_bytes = std::int64_t{16} << 20;
  config.draft_executor = open();
  const auto resolved = resolve_engine_config(config, *target);
  ASSERT_TRUE(resolved.ok()) << resolved.status().to_string();
  EXPECT_EQ(resolved->cache.sliding_windows.size(), 2u);
  EXPECT_EQ(resolved->cache.num_blocks, (std::int64_t{16} << 20) / (32768 + 32768));
}

}  // namespace
}  // namespace pagoda::engine
