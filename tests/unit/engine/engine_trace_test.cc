// Trace events from the engine loop, collected by a fake sink: their order and content for
// normal, stopped, aborted and preempted requests, who is traced, and that a trace never
// changes what the client receives.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "engine_test_support.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {
namespace {

using trace::TraceEvent;
using trace::TraceEventKind;

class CollectingSink final : public trace::TraceSink {
 public:
  bool write(const TraceEvent& event) override {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
    return true;
  }
  trace::TraceSinkStats stats() const override {
    std::lock_guard lock(mutex_);
    return {static_cast<std::int64_t>(events_.size()), 0, 0};
  }
  std::vector<TraceEvent> events_of(const std::string& request_id) const {
    std::lock_guard lock(mutex_);
    std::vector<TraceEvent> out;
    for (const TraceEvent& e : events_) {
      if (e.request_id == request_id) out.push_back(e);
    }
    return out;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return events_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

struct TracedEngine {
  Engine engine;
  std::shared_ptr<CollectingSink> sink;
};

TracedEngine make_traced_engine(EngineConfig config = {}, std::int64_t top_n = 3) {
  auto sink = std::make_shared<CollectingSink>();
  config.trace_sink = sink;
  config.trace_top_n = top_n;
  return {make_engine(std::move(config)), sink};
}

EngineRequest traced(std::vector<std::int32_t> prompt, std::int64_t max_tokens) {
  EngineRequest r = request(std::move(prompt), max_tokens);
  r.trace = true;
  return r;
}

std::vector<TraceEventKind> kinds(const std::vector<TraceEvent>& events) {
  std::vector<TraceEventKind> out;
  for (const TraceEvent& e : events) out.push_back(e.kind);
  return out;
}

std::vector<TraceEvent> of_kind(const std::vector<TraceEvent>& events, TraceEventKind kind) {
  std::vector<TraceEvent> out;
  std::copy_if(events.begin(), events.end(), std::back_inserter(out),
               [&](const TraceEvent& e) { return e.kind == kind; });
  return out;
}

// The final output reaches the client right after the finished event is handed over; wait for
// the stream, then read the events.
std::vector<TraceEvent> run_traced(TracedEngine& t, EngineRequest r, Collected* collected) {
  auto stream = t.engine.client->submit(std::move(r));
  EXPECT_TRUE(stream.ok()) << stream.status().to_string();
  *collected = collect(**stream);
  return t.sink->events_of((*stream)->request_id());
}

TEST(EngineTraceTest, NormalRequestTellsItsWholeLife) {
  TracedEngine t = make_traced_engine();
  Collected c;
  const std::vector<TraceEvent> events = run_traced(t, traced(prompt_of(1, 20), 5), &c);
  ASSERT_EQ(kinds(events),
            (std::vector{TraceEventKind::kAdmitted, TraceEventKind::kScheduled,
                         TraceEventKind::kPrefillChunk, TraceEventKind::kToken,
                         TraceEventKind::kToken, TraceEventKind::kToken, TraceEventKind::kToken,
                         TraceEventKind::kToken, TraceEventKind::kFinished}));
  EXPECT_EQ(events[0].num_prompt_tokens, 20);
  EXPECT_EQ(events[1].num_cached_tokens, 0);
  EXPECT_EQ(events[2].num_chunk_tokens, 20);
  EXPECT_EQ(events[2].num_computed_tokens, 20);
  const auto tokens = of_kind(events, TraceEventKind::kToken);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i].index, static_cast<std::int64_t>(i));
    EXPECT_EQ(tokens[i].token_id, c.tokens[0][i]);  // the trace tells what the client got
    ASSERT_TRUE(tokens[i].logprob.has_value());
    EXPECT_LE(*tokens[i].logprob, 0.0F);
    ASSERT_EQ(tokens[i].alternatives.size(), 3u);
    EXPECT_GE(tokens[i].alternatives[0].logprob, tokens[i].alternatives[2].logprob);
    EXPECT_EQ(tokens[i].batch_size, 1);
    if (i > 0) {
      EXPECT_GE(tokens[i].step, tokens[i - 1].step + 1);
    }
  }
  EXPECT_EQ(events.back().finish_reason, "length");
  EXPECT_EQ(events.back().num_output_tokens, 5);
  EXPECT_TRUE(events.back().time_to_first_token.has_value());
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_GE(events[i].time, events[i - 1].time);
  // The client did not ask for logprobs: the trace's alternatives stay out of its outputs.
  EXPECT_TRUE(c.finals[0].output.logprobs.empty());
}

TEST(EngineTraceTest, ASlotFreedByATracedRequestServesTheNextCleanly) {
  // One after another, so all three take slot 0: a traced request, an untraced one (no events,
  // and none of the trace's alternatives in its sampling), then a traced one again.
  TracedEngine t = make_traced_engine();
  Collected first;
  Collected quiet;
  Collected last;
  const std::vector<TraceEvent> a = run_traced(t, traced(prompt_of(1, 20), 3), &first);
  const std::size_t after_first = t.sink->size();
  EXPECT_EQ(after_first, a.size());
  EXPECT_TRUE(run_traced(t, request(prompt_of(2, 6), 4), &quiet).empty());
  EXPECT_EQ(t.sink->size(), after_first);
  EXPECT_TRUE(quiet.finals[0].output.logprobs.empty());
  EXPECT_EQ(quiet.tokens[0].size(), 4u);
  const std::vector<TraceEvent> c = run_traced(t, traced(prompt_of(3, 11), 2), &last);
  EXPECT_EQ(t.sink->size(), after_first + c.size());
  ASSERT_EQ(kinds(c), (std::vector{TraceEventKind::kAdmitted, TraceEventKind::kScheduled,
                                   TraceEventKind::kPrefillChunk, TraceEventKind::kToken,
                                   TraceEventKind::kToken, TraceEventKind::kFinished}));
  EXPECT_EQ(c[0].num_prompt_tokens, 11);
  EXPECT_EQ(c[2].num_chunk_tokens, 11);
  EXPECT_EQ(c.back().num_output_tokens, 2);
}

TEST(EngineTraceTest, OnlyAskedOrSampledRequestsAreTraced) {
  {
    TracedEngine t = make_traced_engine();
    Collected c;
    EXPECT_TRUE(run_traced(t, request(prompt_of(2, 10), 4), &c).empty());
    EXPECT_EQ(t.sink->size(), 0u);
  }
  EngineConfig config;
  config.trace_sample_rate = 1.0;
  TracedEngine t = make_traced_engine(config);
  Collected c;
  EXPECT_EQ(of_kind(run_traced(t, request(prompt_of(2, 10), 4), &c), TraceEventKind::kToken).size(),
            4u);
}

TEST(EngineTraceTest, StopTokenEndsTheTraceWithStop) {
  // Learn the outputs, then stop on the first one after the first that did not occur before.
  const auto tokens = [] {
    Engine e = make_engine();
    return collect(**e.client->submit(request(prompt_of(3, 12), 8))).tokens[0];
  }();
  std::size_t k = 1;
  while (k < tokens.size() && std::find(tokens.begin(), tokens.begin() + static_cast<long>(k),
                                        tokens[k]) != tokens.begin() + static_cast<long>(k)) {
    ++k;
  }
  ASSERT_LT(k, tokens.size()) << "the fake model repeats one token";
  TracedEngine t = make_traced_engine();
  EngineRequest r = traced(prompt_of(3, 12), 8);
  r.stop_token_ids = {tokens[k]};
  Collected c;
  const auto events = run_traced(t, std::move(r), &c);
  EXPECT_EQ(of_kind(events, TraceEventKind::kToken).size(), k + 1);
  EXPECT_EQ(events.back().kind, TraceEventKind::kFinished);
  EXPECT_EQ(events.back().finish_reason, "stop");
}

TEST(EngineTraceTest, AbortedRequestEndsWithAbort) {
  TracedEngine t = make_traced_engine();
  t.engine.executor->hold_at_call(1);  // the first decode waits: the abort lands mid-generation
  auto s = t.engine.client->submit(traced(prompt_of(4, 30), 400));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->next(std::chrono::seconds(10)).ok());
  t.engine.client->abort((*s)->request_id());
  t.engine.executor->hold(false);
  collect(**s);
  const auto events = t.sink->events_of((*s)->request_id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, TraceEventKind::kFinished);
  EXPECT_EQ(events.back().finish_reason, "abort");
  EXPECT_EQ(of_kind(events, TraceEventKind::kFinished).size(), 1u);
}

TEST(EngineTraceTest, PreemptedRequestsTellPreemptionResumptionAndRefill) {
  EngineConfig config;
  config.cache.num_blocks = 12;  // as PrefixHitsAndPreemptionKeepTheOutput: 4 of 8 fit
  config.scheduler.max_model_len = 128;
  TracedEngine t = make_traced_engine(config);
  t.engine.executor->hold(true);
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 8; ++i)
    streams.push_back(*t.engine.client->submit(traced(prompt_of(9, 64), 24)));
  t.engine.executor->hold(false);
  int num_preempted = 0;
  for (auto& s : streams) {
    collect(*s);
    const auto events = t.sink->events_of(s->request_id());
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.front().kind, TraceEventKind::kAdmitted);
    EXPECT_EQ(events.back().kind, TraceEventKind::kFinished);
    EXPECT_EQ(of_kind(events, TraceEventKind::kToken).size(), 24u);
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind != TraceEventKind::kPreempted) continue;
      ++num_preempted;
      // Next for this request: resumed, then the recompute of prompt + outputs so far (a
      // chunk), unless the prefix cache still held all but the newest token (a plain decode).
      ASSERT_LT(i + 2, events.size());
      EXPECT_EQ(events[i + 1].kind, TraceEventKind::kResumed);
      EXPECT_EQ(events[i + 1].num_output_tokens, events[i].num_output_tokens);
      EXPECT_TRUE(events[i + 2].kind == TraceEventKind::kPrefillChunk ||
                  events[i + 2].kind == TraceEventKind::kToken);
    }
  }
  EXPECT_GT(num_preempted, 0);
  const EngineStats stats = settled_stats(*t.engine.client);
  EXPECT_GT(stats.trace_seconds, 0.0);
  EXPECT_EQ(stats.trace_events_written, static_cast<std::int64_t>(t.sink->size()));
}

TEST(EngineTraceTest, ClientLogprobsKeepTheirOwnCount) {
  TracedEngine t = make_traced_engine(EngineConfig{}, /*top_n=*/4);
  EngineRequest r = traced(prompt_of(5, 10), 3);
  r.sampling.logprobs = 1;
  r.stream = false;  // the final output carries every token's logprobs
  Collected c;
  const auto events = run_traced(t, std::move(r), &c);
  const auto& lp = c.finals[0].output.logprobs;
  ASSERT_EQ(lp.size(), 3u);
  for (const TokenLogprobs& l : lp) EXPECT_EQ(l.top.size(), 1u);
  for (const TraceEvent& e : of_kind(events, TraceEventKind::kToken)) {
    EXPECT_EQ(e.alternatives.size(), 4u);
  }
}

}  // namespace
}  // namespace pagoda::engine
