// Every event kind serializes to one line of JSON whatever bytes its texts hold.
#include "trace/trace_event.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pagoda::trace {
namespace {

TraceEvent token_event(std::string text) {
  TraceEvent e;
  e.kind = TraceEventKind::kToken;
  e.request_id = "req-\"1\"\n";
  e.time = 1.5;
  e.step = 7;
  e.index = 3;
  e.token_id = 42;
  e.text = std::move(text);
  e.logprob = -0.25F;
  e.alternatives = {{42, "a\tb", -0.25F}, {7, "\x1b[31m", -1.5F}};
  e.batch_size = 16;
  return e;
}

TEST(TraceEventTest, HostileTextStaysInsideOneJsonLine) {
  // Quotes, newlines, a forged second event, control bytes, invalid UTF-8 (a lone continuation
  // byte, a truncated 3-byte sequence, an overlong encoding).
  const std::string hostile =
      "say \"hi\"\n{\"event\":\"finished\"}\r\n\x01\x7f \x80 \xe2\x82 \xc0\xaf end";
  const std::string line = to_json_line(token_event(hostile));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find('\r'), std::string::npos);
  const auto j = nlohmann::json::parse(line);  // throws on invalid JSON or UTF-8
  EXPECT_EQ(j["event"], "token");
  EXPECT_EQ(j["request_id"], "req-\"1\"\n");
  const std::string text = j["text"];
  EXPECT_EQ(text.substr(0, 34), "say \"hi\"\n{\"event\":\"finished\"}\r\n\x01\x7f ");
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD stands in for bad bytes
  EXPECT_EQ(text.substr(text.size() - 4), " end");
  EXPECT_EQ(j["top"][1]["text"], "\x1b[31m");
  EXPECT_EQ(j["top"].size(), 2u);
  EXPECT_EQ(j["batch_size"], 16);
  EXPECT_DOUBLE_EQ(j["logprob"].get<double>(), -0.25);
}

TEST(TraceEventTest, EveryKindHasItsFields) {
  for (TraceEventKind kind :
       {TraceEventKind::kAdmitted, TraceEventKind::kScheduled, TraceEventKind::kPrefillChunk,
        TraceEventKind::kToken, TraceEventKind::kReasoningStart, TraceEventKind::kReasoningEnd,
        TraceEventKind::kPreempted, TraceEventKind::kResumed, TraceEventKind::kFinished}) {
    TraceEvent e;
    e.kind = kind;
    e.request_id = "r";
    e.finish_reason = "stop";
    e.time_to_first_token = 0.125;
    const auto j = nlohmann::json::parse(to_json_line(e));
    EXPECT_EQ(j["event"], trace_event_name(kind));
    EXPECT_TRUE(j.contains("time") && j.contains("step") && j.contains("request_id"));
    switch (kind) {
      case TraceEventKind::kToken:
        EXPECT_TRUE(j["logprob"].is_null());  // not computed: null, not a made-up number
        EXPECT_TRUE(j["top"].is_array());
        break;
      case TraceEventKind::kFinished:
        EXPECT_EQ(j["finish_reason"], "stop");
        EXPECT_DOUBLE_EQ(j["time_to_first_token"].get<double>(), 0.125);
        EXPECT_TRUE(j["queue_time"].is_null());
        break;
      case TraceEventKind::kPrefillChunk:
        EXPECT_TRUE(j.contains("num_chunk_tokens") && j.contains("num_computed_tokens"));
        break;
      case TraceEventKind::kReasoningEnd:
        EXPECT_TRUE(j.contains("forced") && j.contains("num_reasoning_tokens"));
        break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace pagoda::trace
