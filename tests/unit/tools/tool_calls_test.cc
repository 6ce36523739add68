// Tool calls out of model output, per format: whole outputs split into content and calls, the
// malformed ones left as content, and the stream giving the same content and calls however the
// output is cut into tokens (one byte at a time, random pieces), never sending part of a marker
// as content.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tools/tool_call_format.h"
#include "tools/tool_call_stream.h"

namespace pagoda::tools {
namespace {

struct Case {
  std::string format;
  std::string output;
  std::string content;          // expected
  std::vector<ToolCall> calls;  // expected
};

std::vector<Case> cases() {
  return {
      {"hermes",
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
       "\"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
       "Let me check.\n",
       {{"get_weather", R"({"city":"Paris","unit":"c"})"}, {"get_time", R"({"tz":"CET"})"}}},
      // Stopped at EOS before the closing tag; a '>' and '}' inside a string argument.
      {"hermes",
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"a}>b\\\"<tool_call>\"}}",
       "",
       {{"f", R"({"s":"a}>b\"<tool_call>"})"}}},
      {"hermes",
       "No tools needed: 2 < 3 and <tool is not a tag.",
       "No tools needed: 2 < 3 and <tool is not a tag.",
       {}},
      {"hermes",
       "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
       "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
       {}},
      {"llama3_json",
       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"pagoda\"}}; "
       "{\"name\": \"open\", \"parameters\": {\"id\": 3}}",
       "",
       {{"search", R"({"q":"pagoda"})"}, {"open", R"({"id":3})"}}},
      {"llama3_json", "  {\"name\": \"ping\", \"parameters\": {}}", "", {{"ping", "{}"}}},
      {"llama3_json", "The answer is {42}.", "The answer is {42}.", {}},
      {"llama3_json", "{\"name\": \"broken\", ", "{\"name\": \"broken\", ", {}},
      {"mistral",
       "Sure.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": "
       "\"neg\", \"arguments\": {\"x\": 5}}]",
       "Sure.",
       {{"add", R"({"a":1,"b":2})"}, {"neg", R"({"x":5})"}}},
      {"mistral",
       "[TOOL_CALLS]add[ARGS]{\"a\": 1}[TOOL_CALLS]neg[ARGS]{\"x\": [5, {\"y\": 1}]}",
       "",
       {{"add", R"({"a":1})"}, {"neg", R"({"x":[5,{"y":1}]})"}}},
      {"mistral", "Text with [TOOL_CALL but no calls.", "Text with [TOOL_CALL but no calls.", {}},
  };
}

std::unique_ptr<ToolCallFormat> format_named(const std::string& name) {
  StatusOr<std::unique_ptr<ToolCallFormat>> f = make_tool_call_format(name);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return std::move(*f);
}

TEST(ToolCalls, FinishedOutputsSplitIntoContentAndCalls) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.format + ": " + c.output);
    const ToolOutput out = parse_tool_output(*format_named(c.format), c.output);
    EXPECT_EQ(out.content, c.content);
    EXPECT_EQ(out.calls, c.calls);
  }
}

// Feeds `output` in pieces of the given lengths (cycled) and checks the joined content and the
// calls (each exactly once, indices in order) against the finished split.
void expect_stream_matches(const Case& c, const std::vector<std::size_t>& piece_lengths) {
  const auto format = format_named(c.format);
  ToolCallStream stream(*format);
  std::string content;
  std::vector<ToolCallDelta> deltas;
  const auto take = [&](ToolStreamStep step) {
    content += step.content;
    for (ToolCallDelta& d : step.calls) deltas.push_back(std::move(d));
  };
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < c.output.size(); ++i) {
    const std::size_t n = std::min(piece_lengths[i % piece_lengths.size()], c.output.size() - pos);
    take(stream.feed(std::string_view(c.output).substr(pos, n)));
    // Content sent so far is always a prefix of the final content (no marker fragment leaks).
    ASSERT_TRUE(c.content.starts_with(content) || c.calls.empty()) << "content so far: " << content;
    pos += n;
  }
  take(stream.finish());
  EXPECT_EQ(content, c.content);
  ASSERT_EQ(deltas.size(), c.calls.size());
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    EXPECT_EQ(deltas[i].index, i);
    EXPECT_EQ(deltas[i].call, c.calls[i]);
  }
  EXPECT_EQ(stream.sent_calls(), !c.calls.empty());
}

TEST(ToolCalls, StreamGivesTheSameSplitHoweverTheOutputIsCut) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.format + ": " + c.output);
    expect_stream_matches(c, {1});
    expect_stream_matches(c, {c.output.size()});
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::size_t> lengths(7);
      for (std::size_t& n : lengths) n = 1 + rng() % 9;
      expect_stream_matches(c, lengths);
    }
  }
}

TEST(ToolCalls, HalfAMarkerIsHeldBackUntilItIsDecided) {
  const auto hermes = format_named("hermes");
  ToolCallStream stream(*hermes);
  EXPECT_EQ(stream.feed("Hello <tool").content, "Hello ");
  EXPECT_EQ(stream.feed("box> there").content, "<toolbox> there");
  EXPECT_EQ(stream.finish().content, "");
  const auto llama = format_named("llama3_json");
  ToolCallStream undecided(*llama);
  EXPECT_EQ(undecided.feed("  <|python").content, "");
  EXPECT_EQ(undecided.feed(" said").content, "  <|python said");
}

TEST(ToolCalls, LongContentStreamsInLinearTime) {
  // 256 KiB of text with '<' and '[' everywhere, one byte at a time: each feed looks at its own
  // bytes and a marker's length, so this takes milliseconds (a quadratic scan would not end
  // inside the test's time limit).
  std::string text;
  while (text.size() < (256u << 10)) text += "a < b [c] {d} <tool_ [TOOL_ ";
  for (const std::string& name : tool_call_format_names()) {
    const auto format = format_named(name);
    ToolCallStream stream(*format);
    std::size_t sent = 0;
    for (char ch : text) sent += stream.feed(std::string_view(&ch, 1)).content.size();
    sent += stream.finish().content.size();
    EXPECT_EQ(sent, text.size()) << name;
  }
}

TEST(ToolCalls, UnknownParserNamesTheKnownOnes) {
  const auto f = make_tool_call_format("pythonic9");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("hermes, llama3_json, mistral"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::tools
