// Tool calls on a Generate stream: a forced or auto output's calls land on the sample's last
// message with finish_reason TOOL_CALLS, read from all of the sample's text.
#include "grpc/tool_call_response.h"

#include <gtest/gtest.h>

#include "api/api_error.h"
#include "tools/tool_call_format.h"

namespace pagoda::grpc {
namespace {

engine::StreamOutput output(
    std::int64_t index, std::string text, bool finished,
    engine::RequestStatus status = engine::RequestStatus::kFinishedStopped) {
  engine::StreamOutput out;
  out.index = index;
  out.output.text = std::move(text);
  out.output.finished = finished;
  if (finished) out.output.status = status;
  return out;
}

// Feeds `text` in two pieces to sample `index`; the last message.
v1::GenerateResponse run(ToolCallResponse& calls, std::int64_t index, const std::string& text,
                         engine::RequestStatus status = engine::RequestStatus::kFinishedStopped) {
  v1::GenerateResponse first;
  calls.add(output(index, text.substr(0, text.size() / 2), false), first);
  EXPECT_EQ(first.tool_calls_size(), 0);
  EXPECT_EQ(first.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  v1::GenerateResponse last;
  last.set_finish_reason(status == engine::RequestStatus::kFinishedStopped
                             ? v1::FINISH_REASON_STOP
                             : v1::FINISH_REASON_LENGTH);
  calls.add(output(index, text.substr(text.size() / 2), true, status), last);
  return last;
}

TEST(ToolCallResponse, RequiredCallsComeOnTheLastMessageOfEachSample) {
  api::ResponseOptions options;
  options.tool_calls = api::ToolCallFormat{};
  ToolCallResponse calls(options, "chatcmpl-abc");
  const v1::GenerateResponse last = run(
      calls, 1,
      R"([{"name": "get_weather", "arguments": {"city": "Rome"}}, {"name": "now", "arguments": {}}])");
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_TOOL_CALLS);
  ASSERT_EQ(last.tool_calls_size(), 2);
  EXPECT_EQ(last.tool_calls(0).id(), "call_abc1_0");  // HTTP's ids
  EXPECT_EQ(last.tool_calls(0).function_name(), "get_weather");
  EXPECT_EQ(api::Json::parse(last.tool_calls(0).function_arguments()),
            api::Json::parse(R"({"city": "Rome"})"));
  EXPECT_EQ(last.tool_calls(1).function_name(), "now");
  EXPECT_EQ(last.tool_calls(1).id(), "call_abc1_1");
  EXPECT_FALSE(last.has_content());
}

TEST(ToolCallResponse, ANamedCallsOutputIsItsArgumentsAndACutOneStaysText) {
  api::ResponseOptions options;
  options.tool_calls = api::ToolCallFormat{.function_name = "f"};
  ToolCallResponse calls(options, "r");
  v1::GenerateResponse last = run(calls, 0, R"({"x": 1})");
  ASSERT_EQ(last.tool_calls_size(), 1);
  EXPECT_EQ(last.tool_calls(0).function_name(), "f");
  EXPECT_EQ(last.tool_calls(0).function_arguments(), R"({"x": 1})");

  last = run(calls, 1, R"({"x": 12)", engine::RequestStatus::kFinishedLength);
  EXPECT_EQ(last.tool_calls_size(), 0);
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST(ToolCallResponse, AutoCallsAreParsedWithTheTextAroundThemAsContent) {
  api::ResponseOptions options;
  auto format = tools::make_tool_call_format("hermes");
  ASSERT_TRUE(format.ok());
  options.auto_tool_calls = std::move(*format);
  ToolCallResponse calls(options, "r");
  v1::GenerateResponse last =
      run(calls, 0,
          "Checking.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
          "\"Paris\"}}</tool_call>");
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_TOOL_CALLS);
  ASSERT_EQ(last.tool_calls_size(), 1);
  EXPECT_EQ(last.tool_calls(0).function_name(), "get_weather");
  EXPECT_EQ(last.content(), "Checking.");

  last = run(calls, 1, "No calls here.");
  EXPECT_EQ(last.tool_calls_size(), 0);
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_FALSE(last.has_content());
}

TEST(ToolCallResponse, WithoutToolsNothingChanges) {
  ToolCallResponse calls(api::ResponseOptions{}, "r");
  const v1::GenerateResponse last = run(calls, 0, R"({"name": "x", "arguments": {}})");
  EXPECT_EQ(last.tool_calls_size(), 0);
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_STOP);
}

}  // namespace
}  // namespace pagoda::grpc
