// tool_choice "required" and named functions: the constraint they compile to, the 400s, and the
// response the encoder makes of the forced output, whole and streamed.
#include "api/forced_tool_calls.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "../api/api_test_models.h"
#include "api/chat_request.h"
#include "api/forced_tool_call_stream.h"
#include "api/response_encoder.h"
#include "api/structured_output.h"
#include "structured_test_support.h"

namespace pagoda::api {
namespace {

const char* kTools = R"("tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])";

ApiErrorOr<GenerationJob> chat(const std::string& extra) {
  static const ServedModel model = [] {
    ServedModel m = testing::byte_model();
    m.constraints = structured::testing::byte_compiler();
    return m;
  }();
  ApiErrorOr<GenerationJob> job =
      parse_chat_request(Json::parse(R"({"model": "test-model", "max_tokens": 4,
      "messages": [{"role": "user", "content": "hi"}], )" +
                                     extra + "}"),
                         model, {});
  // Compiled as a frontend does once the parser is through.
  if (!job.ok()) return job;
  if (std::optional<ApiError> error = compile_job_constraint(*job, model)) return *error;
  return job;
}

TEST(ForcedToolCallsTest, NamedAndRequiredCompileTheirGrammar) {
  auto named =
      chat(std::string(kTools) +
           R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  ASSERT_TRUE(named.ok()) << named.error().message;
  ASSERT_NE(named->requests[0].constraint, nullptr);
  ASSERT_TRUE(named->response.tool_calls.has_value());
  EXPECT_EQ(named->response.tool_calls->function_name, "get_weather");
  // The named function's arguments, nothing else.
  EXPECT_TRUE(structured::testing::accepts(named->requests[0].constraint, R"({"city": "Oslo"})"));
  EXPECT_FALSE(structured::testing::accepts(named->requests[0].constraint, R"({"town": "x"})"));

  auto required = chat(std::string(kTools) + R"(, "tool_choice": "required")");
  ASSERT_TRUE(required.ok()) << required.error().message;
  ASSERT_TRUE(required->response.tool_calls.has_value());
  EXPECT_FALSE(required->response.tool_calls->function_name.has_value());
  const auto& calls = required->requests[0].constraint;
  EXPECT_TRUE(structured::testing::accepts(
      calls, R"([{"name": "get_weather", "arguments": {"city": "Rome"}}, {"name": "now", )"
             R"("arguments": {}}])"));
  EXPECT_FALSE(structured::testing::accepts(calls, "[]"));  // at least one call
  EXPECT_FALSE(structured::testing::accepts(calls, R"([{"name": "other", "arguments": {}}])"));

  auto single =
      chat(std::string(kTools) + R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(structured::testing::accepts(
      single->requests[0].constraint,
      R"([{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}])"));

  for (const char* free : {R"("tool_choice": "auto")", R"("tool_choice": "none")", ""}) {
    auto job = chat(std::string(kTools) + (*free ? ", " : "") + free);
    ASSERT_TRUE(job.ok()) << free;
    EXPECT_EQ(job->requests[0].constraint, nullptr) << free;
    EXPECT_FALSE(job->response.tool_calls.has_value()) << free;
  }
}

TEST(ForcedToolCallsTest, BadToolChoicesAre400s) {
  struct Case {
    std::string extra;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"("tool_choice": "required")", "tool_choice", "at least one tool"},
      {std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "x"}})",
       "tool_choice", "'x'"},
      {std::string(kTools) + R"(, "tool_choice": "sometimes")", "tool_choice", "\"required\""},
      {R"("tools": [{"type": "function"}], "tool_choice": "required")", "tools[0]", "name"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}],
          "tool_choice": "required")",
       "tools[0].function.parameters", "JSON schema"},
      {std::string(kTools) + R"(, "tool_choice": "required",
          "response_format": {"type": "json_object"})",
       "tool_choice", "cannot be combined"},
  };
  for (const Case& c : cases) {
    auto job = chat(c.extra);
    ASSERT_FALSE(job.ok()) << c.extra;
    EXPECT_EQ(job.error().http_status, 400);
    EXPECT_EQ(job.error().param.value_or(""), c.param) << c.extra << ": " << job.error().message;
    EXPECT_NE(job.error().message.find(c.message), std::string::npos) << job.error().message;
  }
}

engine::StreamOutput output(
    std::string text, bool finished,
    engine::RequestStatus status = engine::RequestStatus::kFinishedStopped) {
  engine::StreamOutput out;
  out.output.text = std::move(text);
  out.output.finished = finished;
  if (finished) out.output.status = status;
  return out;
}

ResponseOptions options(bool stream, ToolCallFormat format) {
  ResponseOptions o;
  o.id = "chatcmpl-abc";
  o.model = "m";
  o.stream = stream;
  o.num_prompt_tokens = {3};
  o.tool_calls = std::move(format);
  return o;
}

TEST(ForcedToolCallsTest, TheOutputBecomesToolCallsWholeAndStreamed) {
  const auto tokenizer = structured::testing::byte_tokenizer();
  const std::string text = R"([{"name": "get_weather", "arguments": {"city": "Rome"}}, )"
                           R"({"name": "now", "arguments": {}}])";
  ResponseEncoder whole(options(false, {}), tokenizer);
  whole.add(0, output(text.substr(0, 20), false));
  whole.add(0, output(text.substr(20), true));
  const Json body = Json::parse(whole.finish_body().body);
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  const Json& calls = choice["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            Json::parse(R"({"city": "Rome"})"));
  EXPECT_EQ(calls[1]["function"]["name"], "now");
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);

  // Streamed in pieces: no content deltas; each call's id, type and name come first (arguments
  // ""), then its arguments in fragments; reassembled by index they are the same calls.
  ResponseEncoder streamed(options(true, {}), tokenizer);
  std::string sse;
  for (std::size_t at = 0; at < text.size(); at += 7) {
    sse += streamed.add(0, output(text.substr(at, 7), at + 7 >= text.size()));
  }
  Json last;
  std::map<std::size_t, Json> joined;
  std::map<std::size_t, int> fragments;
  for (std::size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos; at += 6) {
    const Json event = Json::parse(sse.substr(at + 6, sse.find("\n\n", at) - at - 6));
    const Json& delta = event["choices"][0]["delta"];
    EXPECT_TRUE(!delta.contains("content") || delta["content"] == "") << event.dump();
    std::set<std::size_t> seen;
    for (const Json& d : delta.value("tool_calls", Json::array())) {
      const auto index = d["index"].get<std::size_t>();
      EXPECT_TRUE(seen.insert(index).second) << "two entries for one call: " << event.dump();
      if (d.contains("id")) {
        EXPECT_FALSE(joined.contains(index)) << "a second header: " << event.dump();
        EXPECT_EQ(d["function"]["arguments"], "");
        joined[index] = d;
        continue;
      }
      ASSERT_TRUE(joined.contains(index)) << "arguments before the name: " << event.dump();
      joined[index]["function"]["arguments"] =
          joined[index]["function"]["arguments"].get<std::string>() +
          d["function"]["arguments"].get<std::string>();
      ++fragments[index];
    }
    last = event;
  }
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_GT(fragments[0], 1);  // the arguments came in several pieces
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(joined[k]["id"], calls[k]["id"]);
    EXPECT_EQ(joined[k]["function"]["name"], calls[k]["function"]["name"]);
    EXPECT_EQ(Json::parse(joined[k]["function"]["arguments"].get<std::string>()),
              Json::parse(calls[k]["function"]["arguments"].get<std::string>()));
  }
}

// Every split of a required output into pieces gives the same names and arguments.
TEST(ForcedToolCallStreamTest, AnySplitGivesTheSameCalls) {
  const std::string text =
      R"([{"name": "we\"ird", "arguments": {"s": "a}]\"[{", "n": [1, {"x": null}]}}, )"
      R"({"name": "now", "arguments": {}}, {"name": "n", "arguments": 42}])";
  const auto run = [&](std::size_t piece) {
    ForcedToolCallStream stream({});
    std::vector<std::pair<std::string, std::string>> calls;
    for (std::size_t at = 0; at < text.size(); at += piece) {
      for (const ForcedToolCallDelta& d : stream.feed(std::string_view(text).substr(at, piece))) {
        if (d.name) {
          EXPECT_EQ(d.index, calls.size());
          calls.emplace_back(*d.name, "");
        }
        EXPECT_LT(d.index, calls.size());
        if (d.index < calls.size()) calls[d.index].second += d.arguments;
      }
    }
    return calls;
  };
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"we\"ird", R"({"s": "a}]\"[{", "n": [1, {"x": null}]})"}, {"now", "{}"}, {"n", "42"}};
  for (std::size_t piece = 1; piece <= text.size(); ++piece) {
    EXPECT_EQ(run(piece), expected) << "pieces of " << piece;
  }
}

TEST(ForcedToolCallStreamTest, ANamedCallsNameComesOnceThenTheOutputAsItsArguments) {
  ForcedToolCallStream stream({.function_name = "f"});
  EXPECT_TRUE(stream.feed("").empty());
  EXPECT_FALSE(stream.started());
  EXPECT_EQ(stream.feed(R"({"a")"),
            (std::vector<ForcedToolCallDelta>{{.index = 0, .name = "f", .arguments = R"({"a")"}}));
  EXPECT_TRUE(stream.started());
  EXPECT_EQ(stream.feed(": 1}"),
            (std::vector<ForcedToolCallDelta>{{.index = 0, .arguments = ": 1}"}}));
}

TEST(ForcedToolCallsTest, ANamedCallsArgumentsAreTheOutputAndACutOutputStaysText) {
  const auto tokenizer = structured::testing::byte_tokenizer();
  ResponseEncoder named(options(false, {.function_name = "get_weather"}), tokenizer);
  named.add(0, output(R"({"city": "Oslo"})", true));
  const Json choice = Json::parse(named.finish_body().body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Oslo"})");

  ResponseEncoder cut(options(false, {.function_name = "get_weather"}), tokenizer);
  cut.add(0, output(R"({"city": "Os)", true, engine::RequestStatus::kFinishedLength));
  const Json cut_choice = Json::parse(cut.finish_body().body)["choices"][0];
  EXPECT_EQ(cut_choice["finish_reason"], "length");
  EXPECT_EQ(cut_choice["message"]["content"], R"({"city": "Os)");
}

}  // namespace
}  // namespace pagoda::api
