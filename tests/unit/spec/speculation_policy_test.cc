// The adaptive policy: the batch cutoff, k shrinking with the acceptance EMA, drafting off below
// the floor with a re-probe every reprobe_interval decode steps, recovery after good probes.
#include "spec/speculation_policy.h"

#include <gtest/gtest.h>

namespace pagoda::spec {
namespace {

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
  EXPECT_EQ(policy.num_tokens_to_draft("a"), 4);
  for (int i = 0; i < 10; ++i) policy.record("a", 4, 4);
  EXPECT_DOUBLE_EQ(policy.acceptance_rate("a"), 1.0);
  EXPECT_EQ(policy.num_tokens_to_draft("a"), 4);
}

TEST(SpeculationPolicyTest, KShrinksWithTheEma) {
  SpeculationPolicy policy(config());
  policy.record("a", 4, 0);  // EMA 0.75 -> ceil(3)
  EXPECT_DOUBLE_EQ(policy.acceptance_rate("a"), 0.75);
  EXPECT_EQ(policy.num_tokens_to_draft("a"), 3);
  policy.record("a", 4, 0);  // 0.5625 -> ceil(2.25) = 3
  EXPECT_EQ(policy.num_tokens_to_draft("a"), 3);
  policy.record("a", 4, 0);  // 0.421875 -> ceil(1.69) = 2
  EXPECT_EQ(policy.num_tokens_to_draft("a"), 2);
}

TEST(SpeculationPolicyTest, LowAcceptanceTurnsDraftingOffWithPeriodicReprobes) {
  SpeculationPolicy policy(config());
  for (int i = 0; i < 6; ++i) policy.record("a", 4, 0);  // 0.75^6 = 0.178 < 0.25
  ASSERT_LT(policy.acceptance_rate("a"), 0.25);
  std::vector<std::int64_t> ks;
  for (int step = 0; step < 10; ++step) ks.push_back(policy.num_tokens_to_draft("a"));
  EXPECT_EQ(ks, (std::vector<std::int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 0, 4}));
  // A good probe lifts the EMA back over the floor: drafting resumes.
  policy.record("a", 4, 4);
  EXPECT_GE(policy.acceptance_rate("a"), 0.25);
  EXPECT_GT(policy.num_tokens_to_draft("a"), 0);
}

TEST(SpeculationPolicyTest, RequestsAreTrackedApart) {
  SpeculationPolicy policy(config());
  for (int i = 0; i < 6; ++i) policy.record("bad", 4, 0);
  EXPECT_EQ(policy.num_tokens_to_draft("bad"), 0);
  EXPECT_EQ(policy.num_tokens_to_draft("good"), 4);
  policy.remove("bad");
  EXPECT_DOUBLE_EQ(policy.acceptance_rate("bad"), 1.0);
}

}  // namespace
}  // namespace pagoda::spec
