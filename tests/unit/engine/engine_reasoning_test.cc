// Reasoning through the engine loop (fake model, byte tokenizer: one token per byte): the
// thinking span is split out of the text, counted in usage, and a budget closes it by forcing
// the end tag, with the trace telling where the span opened and closed.
#include <gtest/gtest.h>

#include <mutex>

#include "engine_test_support.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {
namespace {

class EventLog final : public trace::TraceSink {
 public:
  bool write(const trace::TraceEvent& e) override {
    std::lock_guard lock(mutex_);
    events.push_back(e);
    return true;
  }
  trace::TraceSinkStats stats() const override { return {}; }
  std::vector<trace::TraceEvent> events;

 private:
  std::mutex mutex_;
};

std::vector<std::int32_t> bytes_of(std::string_view text) {
  return {text.begin(), text.end()};
}

const std::string kEndTag = "</think>";

struct Reasoning {
  Engine engine;
  std::shared_ptr<EventLog> log = std::make_shared<EventLog>();
};

Reasoning make_reasoning_engine() {
  Reasoning r;
  EngineConfig config;
  config.reasoning = ReasoningTags{"<think>", kEndTag};
  config.trace_sink = r.log;
  r.engine = make_engine(config);
  return r;
}

EngineRequest thinking_request(std::int64_t max_tokens, std::optional<std::int64_t> budget) {
  // The prompt opens the span, as a thinking model's chat template does.
  EngineRequest r = request(bytes_of("Question: 2+2?\n<think>\n"), max_tokens);
  r.max_reasoning_tokens = budget;
  r.ignore_eos = true;
  r.stream = false;
  r.trace = true;
  r.separate_reasoning = true;
  return r;
}

TEST(EngineReasoningTest, BudgetForcesTheEndTagAndTheAnswerFollows) {
  Reasoning r = make_reasoning_engine();
  auto stream = r.engine.client->submit(thinking_request(30, /*budget=*/6));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  Collected c = collect(**stream);
  const RequestOutput& out = c.finals[0].output;
  ASSERT_EQ(out.token_ids.size(), 30u);
  // Six model tokens, then the end tag's bytes, forced.
  EXPECT_EQ(std::vector<std::int32_t>(out.token_ids.begin() + 6, out.token_ids.begin() + 14),
            bytes_of(kEndTag));
  EXPECT_EQ(out.usage.num_reasoning_tokens, 6 + static_cast<std::int64_t>(kEndTag.size()));
  EXPECT_EQ(out.reasoning_text.find("</think>"), std::string::npos);
  EXPECT_EQ(out.text.find("</think>"), std::string::npos);
  EXPECT_FALSE(out.text.empty());  // the answer follows the span

  std::vector<trace::TraceEvent> span;
  for (const auto& e : r.log->events) {
    if (e.kind == trace::TraceEventKind::kReasoningStart ||
        e.kind == trace::TraceEventKind::kReasoningEnd) {
      span.push_back(e);
    }
  }
  ASSERT_EQ(span.size(), 2u);
  EXPECT_EQ(span[0].kind, trace::TraceEventKind::kReasoningStart);
  EXPECT_EQ(span[0].index, 0);
  EXPECT_EQ(span[1].kind, trace::TraceEventKind::kReasoningEnd);
  EXPECT_TRUE(span[1].forced);
  EXPECT_EQ(span[1].num_reasoning_tokens, 14);
  EXPECT_EQ(r.log->events.back().kind, trace::TraceEventKind::kFinished);
  EXPECT_EQ(r.log->events.back().num_reasoning_tokens, 14);
}

TEST(EngineReasoningTest, ZeroBudgetClosesTheSpanAtOnce) {
  Reasoning r = make_reasoning_engine();
  Collected c = collect(**r.engine.client->submit(thinking_request(12, /*budget=*/0)));
  const RequestOutput& out = c.finals[0].output;
  EXPECT_EQ(std::vector<std::int32_t>(out.token_ids.begin(), out.token_ids.begin() + 8),
            bytes_of(kEndTag));
  EXPECT_TRUE(out.reasoning_text.empty());
  EXPECT_EQ(out.usage.num_reasoning_tokens, 8);
}

TEST(EngineReasoningTest, WithoutABudgetEverythingInTheOpenSpanIsReasoning) {
  Reasoning r = make_reasoning_engine();
  Collected c = collect(**r.engine.client->submit(thinking_request(10, std::nullopt)));
  const RequestOutput& out = c.finals[0].output;
  EXPECT_EQ(out.usage.num_reasoning_tokens, 10);
  EXPECT_TRUE(out.text.empty());
  // The same tokens without a reasoning parser: all text, and the same text.
  Engine plain = make_engine();
  EngineRequest same = thinking_request(10, std::nullopt);
  same.max_reasoning_tokens.reset();
  Collected p = collect(**plain.client->submit(std::move(same)));
  EXPECT_EQ(p.finals[0].output.token_ids, out.token_ids);
  EXPECT_EQ(p.finals[0].output.text, out.reasoning_text);
}

TEST(EngineReasoningTest, UnseparatedTextKeepsTheTagsAndStillCounts) {
  Reasoning r = make_reasoning_engine();
  EngineRequest req = thinking_request(20, /*budget=*/4);
  req.separate_reasoning = false;  // a completions client reads the raw text
  Collected c = collect(**r.engine.client->submit(std::move(req)));
  const RequestOutput& out = c.finals[0].output;
  EXPECT_TRUE(out.reasoning_text.empty());
  EXPECT_NE(out.text.find("</think>"), std::string::npos);
  EXPECT_EQ(out.usage.num_reasoning_tokens, 4 + static_cast<std::int64_t>(kEndTag.size()));
}

TEST(EngineReasoningTest, BudgetNeedsAReasoningParser) {
  Engine plain = make_engine();
  auto refused = plain.client->submit(thinking_request(10, 5));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  Reasoning r = make_reasoning_engine();
  EXPECT_EQ(r.engine.client->submit(thinking_request(10, -1)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda::engine
