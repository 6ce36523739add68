// The adaptive policy: the batch cutoff, k shrinking with the acceptance EMA, drafting off below
// the floor with a re-probe every reprobe_interval decode steps, recovery after good probes;
// requests by slot, and a removed slot's next request starts clean.
#include "spec/speculation_policy.h"

#include <gtest/gtest.h>

namespace pagoda::spec {
namespace {

constexpr std::int32_t kA = 0;

SpeculativeConfig config() {
  SpeculativeConfig c;
  c.num_speculative_tokens = 4;
  c.disable_by_batch_size = 8;
  c.min_acceptance_rate = 0.25;
  c.reprobe_interval = 5;
  return c;
}

TEST(SpeculationPolicyTest, BatchAboveTheCutoffDoesNotDraft) {
  const SpeculationPolicy policy(config());
  EXPECT_TRUE(policy.allows_batch(1));
  EXPECT_TRUE(policy.allows_batch(8));
  EXPECT_FALSE(policy.allows_batch(9));
  EXPECT_FALSE(policy.allows_batch(32));
}

TEST(SpeculationPolicyTest, FullAcceptanceKeepsK) {
  SpeculationPolicy policy(config());
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 4);
  for (int i = 0; i < 10; ++i) policy.record(kA, 4, 4);
  EXPECT_DOUBLE_EQ(policy.acceptance_rate(kA), 1.0);
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 4);
}

TEST(SpeculationPolicyTest, KShrinksWithTheEma) {
  SpeculationPolicy policy(config());
  policy.record(kA, 4, 0);  // EMA 0.75 -> ceil(3)
  EXPECT_DOUBLE_EQ(policy.acceptance_rate(kA), 0.75);
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 3);
  policy.record(kA, 4, 0);  // 0.5625 -> ceil(2.25) = 3
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 3);
  policy.record(kA, 4, 0);  // 0.421875 -> ceil(1.69) = 2
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 2);
}

TEST(SpeculationPolicyTest, LowAcceptanceTurnsDraftingOffWithPeriodicReprobes) {
  SpeculationPolicy policy(config());
  for (int i = 0; i < 6; ++i) policy.record(kA, 4, 0);  // 0.75^6 = 0.178 < 0.25
  ASSERT_LT(policy.acceptance_rate(kA), 0.25);
  std::vector<std::int64_t> ks;
  for (int step = 0; step < 10; ++step) ks.push_back(policy.num_tokens_to_draft(kA));
  EXPECT_EQ(ks, (std::vector<std::int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 0, 4}));
  // A good probe lifts the EMA back over the floor: drafting resumes.
  policy.record(kA, 4, 4);
  EXPECT_GE(policy.acceptance_rate(kA), 0.25);
  EXPECT_GT(policy.num_tokens_to_draft(kA), 0);
}

TEST(SpeculationPolicyTest, RequestsAreTrackedApart) {
  SpeculationPolicy policy(config());
  constexpr std::int32_t kBad = 3;  // slots need not come in order: the policy grows to them
  constexpr std::int32_t kGood = 1;
  for (int i = 0; i < 6; ++i) policy.record(kBad, 4, 0);
  EXPECT_EQ(policy.num_tokens_to_draft(kBad), 0);
  EXPECT_EQ(policy.num_tokens_to_draft(kGood), 4);
  policy.remove(kBad);
  EXPECT_DOUBLE_EQ(policy.acceptance_rate(kBad), 1.0);
  EXPECT_DOUBLE_EQ(policy.acceptance_rate(7), 1.0);  // never seen
}

TEST(SpeculationPolicyTest, AReusedSlotStartsClean) {
  SpeculationPolicy policy(config());
  for (int i = 0; i < 6; ++i) policy.record(kA, 4, 0);
  for (int step = 0; step < 3; ++step) EXPECT_EQ(policy.num_tokens_to_draft(kA), 0);
  policy.remove(kA);
  // The slot's next request: full k, and once it too falls below the floor, its re-probe count
  // starts from zero (the old request's 3 steps off are gone).
  EXPECT_DOUBLE_EQ(policy.acceptance_rate(kA), 1.0);
  EXPECT_EQ(policy.num_tokens_to_draft(kA), 4);
  for (int i = 0; i < 6; ++i) policy.record(kA, 4, 0);
  std::vector<std::int64_t> ks;
  for (int step = 0; step < 5; ++step) ks.push_back(policy.num_tokens_to_draft(kA));
  EXPECT_EQ(ks, (std::vector<std::int64_t>{0, 0, 0, 0, 4}));
}

}  // namespace
}  // namespace pagoda::spec
