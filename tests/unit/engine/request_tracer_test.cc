// RequestTracer by slot: events carry the id given at admission, untraced requests reach the
// sink with nothing, and a released slot's next request is traced only if it asks to be, under
// its own id and with its own prompt length.
#include "engine/request_tracer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "byte_tokenizer_for_test.h"
#include "scheduler_test_util.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {
namespace {

using trace::TraceEvent;
using trace::TraceEventKind;

class CollectingSink final : public trace::TraceSink {
 public:
  bool write(const TraceEvent& event) override {
    events.push_back(event);
    return true;
  }
  trace::TraceSinkStats stats() const override { return {}; }

  std::vector<TraceEvent> events;
};

RequestOutput final_output(const std::string& request_id) {
  RequestOutput out;
  out.request_id = request_id;
  out.finished = true;
  out.status = RequestStatus::kFinishedLength;
  return out;
}

TEST(RequestTracerTest, AReusedSlotStartsClean) {
  auto sink = std::make_shared<CollectingSink>();
  const std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();
  RequestTracer tracer(sink, /*top_n=*/2, *tokenizer, /*unix_origin=*/0.0);
  constexpr std::int32_t kSlot = 3;  // the tracer grows to any slot

  tracer.admitted(kSlot, "old", /*traced=*/true, /*num_prompt_tokens=*/4, 1.0);
  EXPECT_TRUE(tracer.is_traced(kSlot));
  EXPECT_EQ(tracer.top_n_for(kSlot), 2);
  EXPECT_FALSE(tracer.is_traced(0));
  tracer.token(kSlot, 0, 'a', nullptr, 1.5);
  tracer.finished(kSlot, final_output("old"), 2.0);
  tracer.release(kSlot);
  EXPECT_FALSE(tracer.is_traced(kSlot));
  EXPECT_EQ(tracer.top_n_for(kSlot), 0);
  ASSERT_EQ(sink->events.size(), 3u);
  for (const TraceEvent& e : sink->events) EXPECT_EQ(e.request_id, "old");

  // An untraced request on the slot: none of its hooks reach the sink, under any id.
  tracer.admitted(kSlot, "quiet", /*traced=*/false, 7, 3.0);
  EXPECT_FALSE(tracer.is_traced(kSlot));
  tracer.token(kSlot, 0, 'b', nullptr, 3.1);
  tracer.speculation(kSlot, 1, 2, 1, 3.2);
  tracer.reasoning_start(kSlot, 1, 3.3);
  tracer.reasoning_end(kSlot, 2, 1, false, 3.4);
  tracer.finished(kSlot, final_output("quiet"), 3.5);
  tracer.release(kSlot);
  EXPECT_EQ(sink->events.size(), 3u);

  // A traced request on the slot: its own id and prompt length, from admission to scheduling.
  std::unique_ptr<Scheduler> scheduler = testing::make_scheduler({});
  std::unique_ptr<Request> request =
      testing::make_request("new", std::vector<std::int32_t>(9, 'x'), 4);
  request->set_slot(kSlot);
  ASSERT_TRUE(scheduler->add_request(std::move(request)).ok());
  tracer.admitted(kSlot, "new", /*traced=*/true, 9, 4.0);
  const SchedulerOutput scheduled = scheduler->schedule();
  tracer.begin_step(1, 1);
  tracer.scheduled(scheduled, *scheduler, 4.5);
  tracer.token(kSlot, 0, 'c', nullptr, 4.6);
  const std::vector<TraceEvent> events(sink->events.begin() + 3, sink->events.end());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, TraceEventKind::kAdmitted);
  EXPECT_EQ(events[1].kind, TraceEventKind::kScheduled);
  EXPECT_EQ(events[2].kind, TraceEventKind::kPrefillChunk);
  EXPECT_EQ(events[3].kind, TraceEventKind::kToken);
  for (const TraceEvent& e : events) EXPECT_EQ(e.request_id, "new");
  EXPECT_EQ(events[0].num_prompt_tokens, 9);
  EXPECT_EQ(events[1].num_prompt_tokens, 9);
  EXPECT_EQ(events[2].num_prompt_tokens, 9);
  EXPECT_EQ(events[2].num_computed_tokens, 9);
  EXPECT_EQ(events[3].index, 0);
  EXPECT_EQ(events[3].step, 1);
}

TEST(RequestTracerTest, AdmittingATracedSlotTwiceIsABug) {
  auto sink = std::make_shared<CollectingSink>();
  const std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();
  RequestTracer tracer(sink, 0, *tokenizer, 0.0);
  tracer.admitted(0, "a", true, 1, 0.0);
  EXPECT_DEATH(tracer.admitted(0, "b", true, 1, 0.0), "slot 0 is not free");
}

}  // namespace
}  // namespace pagoda::engine
