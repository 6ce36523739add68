// Speculator by slot: the verifier's state, the policy's acceptance EMA and the draft model's
// cache state all sit at the request's slot, and remove() clears all three, so a reused slot
// drafts exactly as a fresh speculator would. The fake model drafts for itself; the target's
// logits are written by hand.
#include "engine/speculator.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_model_executor.h"
#include "scheduler_test_util.h"
#include "spec/draft_model_proposer.h"

namespace pagoda::engine {
namespace {

constexpr std::int64_t kDraftBlocks = 8;

std::unique_ptr<Speculator> make_speculator() {
  spec::SpeculativeConfig config;
  config.method = spec::SpeculativeMethod::kDraftModel;
  config.model = "fake";
  config.num_speculative_tokens = 4;
  config.disable_by_batch_size = 64;
  auto draft = std::make_shared<testing::FakeModelExecutor>();
  const std::int64_t vocab = draft->info().vocab_size;
  auto speculator =
      Speculator::create(config, std::move(draft), vocab, /*block_size=*/16, kDraftBlocks);
  EXPECT_TRUE(speculator.ok()) << speculator.status().to_string();
  return std::move(speculator).value();
}

const spec::DraftModelProposer& draft_model(const Speculator& speculator) {
  return static_cast<const spec::DraftModelProposer&>(speculator.proposer());
}

std::vector<std::int32_t> prompt(std::int32_t seed) {
  std::vector<std::int32_t> p;
  for (std::int32_t i = 0; i < 20; ++i) p.push_back((seed * 31 + i * 7) % 256);
  return p;
}

// Admits `id` at `slot` in both, runs its prefill (sampling token 42), then proposes: the
// drafts the speculator sets for its first decode step.
std::vector<std::int32_t> first_drafts(Speculator& speculator, Scheduler& scheduler,
                                       const std::string& id, std::int32_t slot,
                                       std::int32_t seed) {
  std::unique_ptr<Request> request = testing::make_request(id, prompt(seed), 30);
  request->set_slot(slot);
  EXPECT_TRUE(scheduler.add_request(std::move(request)).ok());
  SamplingParams greedy;
  greedy.temperature = 0.0;
  speculator.add(slot, greedy, prompt(seed), {});
  const SchedulerOutput prefill = scheduler.schedule();
  EXPECT_EQ(prefill.requests.size(), 1u);
  scheduler.update_from_output(prefill, SampledTokens{{{42}}});
  speculator.propose(scheduler);
  return scheduler.find_request(id)->spec_token_ids();
}

TEST(SpeculatorTest, AReusedSlotStartsClean) {
  constexpr std::int32_t kSlot = 0;
  std::unique_ptr<Speculator> speculator = make_speculator();
  std::unique_ptr<Scheduler> scheduler = testing::make_scheduler({});

  // "old": 4 drafts, all rejected, so its acceptance EMA falls to 0.75 (3 drafts next time).
  const std::vector<std::int32_t> old_drafts =
      first_drafts(*speculator, *scheduler, "old", kSlot, 1);
  ASSERT_EQ(old_drafts.size(), 4u);
  EXPECT_TRUE(draft_model(*speculator).has_state(kSlot));
  EXPECT_LT(draft_model(*speculator).num_free_blocks(), kDraftBlocks);
  const SchedulerOutput step = scheduler->schedule();
  ASSERT_EQ(step.requests.size(), 1u);
  ASSERT_EQ(step.requests[0].num_spec_tokens, 4);
  const auto vocab = static_cast<std::size_t>(testing::FakeModelExecutor().info().vocab_size);
  std::vector<float> logits(5 * vocab, 0.0F);
  for (std::size_t row = 0; row < 4; ++row) {
    logits[row * vocab + static_cast<std::size_t>(old_drafts[row] + 1) % vocab] = 10.0F;
  }
  EXPECT_EQ(speculator->verify(step.requests[0], logits).size(), 1u);  // the replacement only
  EXPECT_DOUBLE_EQ(speculator->policy().acceptance_rate(kSlot), 0.75);
  ASSERT_TRUE(scheduler->abort_request("old"));
  speculator->remove(kSlot);
  EXPECT_FALSE(speculator->contains(kSlot));
  EXPECT_FALSE(draft_model(*speculator).has_state(kSlot));
  EXPECT_EQ(draft_model(*speculator).num_free_blocks(), kDraftBlocks);
  EXPECT_DOUBLE_EQ(speculator->policy().acceptance_rate(kSlot), 1.0);

  // "new" on the same slot drafts what a fresh speculator drafts for it: all 4 tokens (a clean
  // EMA), from a draft cache that holds none of old's tokens.
  const std::vector<std::int32_t> reused = first_drafts(*speculator, *scheduler, "new", kSlot, 2);
  std::unique_ptr<Speculator> fresh = make_speculator();
  std::unique_ptr<Scheduler> fresh_scheduler = testing::make_scheduler({});
  EXPECT_EQ(reused, first_drafts(*fresh, *fresh_scheduler, "new", kSlot, 2));
  EXPECT_EQ(reused.size(), 4u);
  EXPECT_TRUE(speculator->contains(kSlot));
}

TEST(SpeculatorTest, AddingAHeldSlotIsABug) {
  std::unique_ptr<Speculator> speculator = make_speculator();
  speculator->add(2, SamplingParams{}, prompt(1), {});
  EXPECT_TRUE(speculator->contains(2));
  EXPECT_FALSE(speculator->contains(0));
  EXPECT_DEATH(speculator->add(2, SamplingParams{}, prompt(2), {}), "slot 2 is not free");
}

}  // namespace
}  // namespace pagoda::engine
