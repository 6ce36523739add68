// A draft model with sliding-window layers (the tiny random Gemma 3: two sliding layers of
// window 12 and one full layer, three KV groups of one layer each) keeps its KV in groups, as the
// target does: the same drafts as with one table for every layer
// (--disable-hybrid-kv-cache-manager), with a ring of a window and a pass's blocks per sliding
// layer, and every block back when the request goes.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/cpu_model_executor.h"
#include "spec/draft_model_proposer.h"

namespace pagoda::spec {
namespace {

const std::string kTinyGemma3 = std::string(PAGODA_TEST_DATA_DIR) + "/forward/tiny_gemma3";
constexpr std::int64_t kNumBlocks = 64;
constexpr std::int64_t kBlockSize = 16;

std::unique_ptr<DraftModelProposer> open_proposer(bool single_table) {
  auto files = open_model_files(kTinyGemma3);
  EXPECT_TRUE(files.ok()) << files.status().to_string();
  if (!files.ok()) return nullptr;
  // A budget of 64 tokens a pass, so a long catch-up runs in chunks.
  auto executor = models::CpuModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.num_threads = 2, .max_num_batched_tokens = 64, .max_model_len = 1024});
  EXPECT_TRUE(executor.ok()) << executor.status().to_string();
  if (!executor.ok()) return nullptr;
  auto proposer =
      DraftModelProposer::create(std::move(*executor), 416, kBlockSize, kNumBlocks, single_table);
  EXPECT_TRUE(proposer.ok()) << proposer.status().to_string();
  return proposer.ok() ? std::move(*proposer) : nullptr;
}

TEST(DraftKvGroupsTest, DraftsMatchOneTableWhileTheSlidingLayersKeepAWindow) {
  auto grouped = open_proposer(/*single_table=*/false);
  auto single = open_proposer(/*single_table=*/true);
  ASSERT_NE(grouped, nullptr);
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(grouped->sliding_windows(), (std::vector<std::int64_t>{12, 12}));
  // A pass of up to 64 tokens and the window before it: (64 + 12 - 1) / 16 rounded up, plus 1.
  EXPECT_EQ(grouped->ring_blocks(), (std::vector<std::int64_t>{6, 6}));
  EXPECT_TRUE(single->sliding_windows().empty());

  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> id(3, 415);
  std::vector<std::int32_t> tokens(200);
  for (auto& t : tokens) t = id(rng);
  SamplingParams greedy;
  greedy.temperature = 0.0;
  std::int64_t max_grouped = 0, max_single = 0;
  // Each round drafts 4 tokens; the "target" takes the first two and a token of its own, so
  // the third and fourth roll back, as a verification that rejects the third draft would.
  for (int round = 0; round < 40; ++round) {
    const ProposalRequest request{
        .slot = 0, .token_ids = tokens, .max_tokens = 4, .sampling = &greedy};
    std::vector<Proposal> from_groups, from_single;
    grouped->propose({&request, 1}, from_groups);
    single->propose({&request, 1}, from_single);
    ASSERT_EQ(from_groups[0].token_ids.size(), 4u) << round;
    ASSERT_EQ(from_groups[0].token_ids, from_single[0].token_ids) << round;
    // Blocks of one layer each: a group's block is a page of its one layer, a one-table
    // block spans all three.
    max_grouped = std::max(max_grouped, kNumBlocks - grouped->num_free_blocks());
    max_single = std::max(max_single, 3 * (kNumBlocks - single->num_free_blocks()));
    tokens.push_back(from_groups[0].token_ids[0]);
    tokens.push_back(from_groups[0].token_ids[1]);
    tokens.push_back((from_groups[0].token_ids[2] + 1) % 416);
  }
  // The last round holds 317 tokens and 3 drafts: 20 blocks of 16 for the full layer, 6 for each
  // sliding layer's ring, where one table takes 20 blocks of all three layers. The first round's
  // catch-up of 200 tokens (in passes of 64) fits the same rings.
  EXPECT_EQ(max_single, 3 * 20);
  EXPECT_EQ(max_grouped, 20 + 2 * 6);
  grouped->remove(0);
  single->remove(0);
  EXPECT_EQ(grouped->num_free_blocks(), kNumBlocks);
  EXPECT_EQ(single->num_free_blocks(), kNumBlocks);
}

// A request whose draft history changes from the first token (as after a failed pass, which
// forgets what the draft cached) starts again at position 0 and rewrites its rings, whose blocks
// had held later positions: the drafts stay those of one table.
TEST(DraftKvGroupsTest, ARestartFromTheFirstTokenRewritesTheRings) {
  auto grouped = open_proposer(/*single_table=*/false);
  auto single = open_proposer(/*single_table=*/true);
  ASSERT_NE(grouped, nullptr);
  ASSERT_NE(single, nullptr);
  std::vector<std::int32_t> tokens(150);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 31 + 5) % 416);
  }
  SamplingParams greedy;
  greedy.temperature = 0.0;
  const auto propose = [&](DraftModelProposer& p, const std::vector<std::int32_t>& t) {
    const ProposalRequest request{.slot = 0, .token_ids = t, .max_tokens = 3, .sampling = &greedy};
    std::vector<Proposal> out;
    p.propose({&request, 1}, out);
    return out[0].token_ids;
  };
  EXPECT_EQ(propose(*grouped, tokens), propose(*single, tokens));
  std::vector<std::int32_t> other = tokens;
  other[0] = (other[0] + 1) % 416;
  other.push_back(9);
  EXPECT_EQ(propose(*grouped, other), propose(*single, other));
  // 151 tokens and 2 drafts: 10 blocks for the full layer, a ring of 6 per sliding layer.
  EXPECT_EQ(grouped->num_free_blocks(), kNumBlocks - (10 + 2 * 6));
  grouped->remove(0);
  EXPECT_EQ(grouped->num_free_blocks(), kNumBlocks);
}

}  // namespace
}  // namespace pagoda::spec
