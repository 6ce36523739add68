// Speculative decoding through the engine loop over FakeModelExecutor (fast, no model file):
// the fake model drafting for itself gives the same tokens as plain decoding with every draft
// accepted, alone, in a batch and across preemptions; each verification is traced and counted;
// no block outlives its request.
#include <gtest/gtest.h>

#include <mutex>

#include "engine_test_support.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {
namespace {

class CollectingSink final : public trace::TraceSink {
 public:
  bool write(const trace::TraceEvent& event) override {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
    return true;
  }
  trace::TraceSinkStats stats() const override { return {}; }
  std::vector<trace::TraceEvent> of_kind(trace::TraceEventKind kind) const {
    std::lock_guard lock(mutex_);
    std::vector<trace::TraceEvent> out;
    for (const trace::TraceEvent& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<trace::TraceEvent> events_;
};

// The fake model as its own draft: same logits, so greedy acceptance is total.
EngineConfig self_drafting(std::int64_t k, std::int64_t num_blocks = 256) {
  EngineConfig config;
  spec::SpeculativeConfig spec;
  spec.method = spec::SpeculativeMethod::kDraftModel;
  spec.model = "fake";
  spec.num_speculative_tokens = k;
  spec.disable_by_batch_size = 64;
  config.speculative = spec;
  config.draft_executor = std::make_shared<FakeModelExecutor>();
  config.cache.num_blocks = num_blocks;
  return config;
}

std::vector<std::vector<std::int32_t>> run(Engine& e, const std::vector<EngineRequest>& requests) {
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (const EngineRequest& r : requests) streams.push_back(*e.client->submit(r));
  std::vector<std::vector<std::int32_t>> out;
  for (auto& s : streams) out.push_back(collect(*s).tokens[0]);
  return out;
}

std::vector<EngineRequest> mixed_batch() {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request(prompt_of(i, 5 + 9 * i), 7 + 6 * i));
  return requests;
}

TEST(EngineSpeculatorTest, SelfDraftingGivesPlainTokensWithEveryDraftAccepted) {
  Engine plain = make_engine();
  Engine spec = make_engine(self_drafting(3));
  EXPECT_EQ(run(spec, mixed_batch()), run(plain, mixed_batch()));
  const EngineStats stats = settled_stats(*spec.client);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_GT(stats.spec_decode.num_drafts, 10);
  EXPECT_EQ(stats.spec_decode.num_accepted_tokens, stats.spec_decode.num_draft_tokens);
  ASSERT_EQ(stats.spec_decode.num_accepted_tokens_per_pos.size(), 3u);
  EXPECT_EQ(stats.spec_decode.num_accepted_tokens_per_pos[0], stats.spec_decode.num_drafts);
  // Steps: with 3 drafts all accepted, each verification yields 4 tokens.
  EXPECT_LT(stats.num_steps, settled_stats(*plain.client).num_steps);
}

TEST(EngineSpeculatorTest, PreemptionDuringSpeculationKeepsTheTokens) {
  Engine plain = make_engine();
  // 12 blocks of 16 tokens for 6 requests of up to 80 tokens: preemptions are certain.
  EngineConfig config = self_drafting(4, /*num_blocks=*/12);
  config.scheduler.max_model_len = 128;
  Engine spec = make_engine(std::move(config));
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request(prompt_of(20 + i, 40), 40));
  // Every request queued before the first step finishes, so four are admitted together and
  // outgrow the pool whatever the machine's timing (submitted one by one on a busy machine, the
  // first could finish before the rest arrived, and nothing was preempted).
  spec.executor->hold(true);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (const EngineRequest& r : requests) streams.push_back(*spec.client->submit(r));
  spec.executor->hold(false);
  std::vector<std::vector<std::int32_t>> speculated;
  for (auto& s : streams) speculated.push_back(collect(*s).tokens[0]);
  EXPECT_EQ(speculated, run(plain, requests));
  const EngineStats stats = settled_stats(*spec.client);
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_GT(stats.spec_decode.num_drafts, 0);
}

TEST(EngineSpeculatorTest, EachVerificationOfATracedRequestIsAnEvent) {
  auto sink = std::make_shared<CollectingSink>();
  EngineConfig config = self_drafting(2);
  config.trace_sink = sink;
  config.trace_top_n = 0;  // alternatives would need logprobs, which turn speculation off
  Engine e = make_engine(std::move(config));
  EngineRequest r = request(prompt_of(3, 10), 9);
  r.trace = true;
  const auto tokens = run(e, {r})[0];
  ASSERT_EQ(tokens.size(), 9u);
  const auto events = sink->of_kind(trace::TraceEventKind::kSpeculation);
  // Token 0 comes from the prefill; then 3 verifications of 2 drafts (3 tokens each) reach 9
  // tokens, the last one cut to what max_tokens leaves.
  ASSERT_FALSE(events.empty());
  std::int64_t index = 1;
  for (const trace::TraceEvent& ev : events) {
    EXPECT_EQ(ev.index, index);
    EXPECT_GE(ev.num_draft_tokens, 1);
    EXPECT_EQ(ev.num_accepted_tokens, ev.num_draft_tokens);
    index += ev.num_accepted_tokens + 1;
  }
  EXPECT_EQ(index, 9);
  const auto token_events = sink->of_kind(trace::TraceEventKind::kToken);
  ASSERT_EQ(token_events.size(), 9u);
  for (std::size_t i = 0; i < token_events.size(); ++i) {
    EXPECT_EQ(token_events[i].index, static_cast<std::int64_t>(i));
    EXPECT_EQ(token_events[i].token_id, tokens[i]);
  }
}

TEST(EngineSpeculatorTest, LogprobRequestsDoNotSpeculate) {
  Engine e = make_engine(self_drafting(3));
  EngineRequest r = request(prompt_of(4, 10), 12);
  r.sampling.logprobs = 2;
  const auto tokens = run(e, {r})[0];
  EXPECT_EQ(tokens.size(), 12u);
  EXPECT_EQ(settled_stats(*e.client).spec_decode.num_drafts, 0);
}

TEST(EngineSpeculatorTest, DraftWithAnotherVocabularyIsRefused) {
  EngineConfig config = self_drafting(3);
  config.draft_executor = std::make_shared<FakeModelExecutor>(/*vocab_size=*/300);
  config.scheduler.max_num_batched_tokens = 64;
  config.eos_token_id = kEos;
  auto client =
      EngineClient::create(config, std::make_unique<FakeModelExecutor>(), make_byte_tokenizer());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::engine
