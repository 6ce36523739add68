// Reasoning through the protocol layer: max_reasoning_tokens / reasoning_effort reach the engine
// request only for a reasoning model, chat responses carry reasoning_content in deltas and
// messages, and usage reports the reasoning tokens.
#include <gtest/gtest.h>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/response_encoder.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

using testing::json;

ServedModel thinking_model() {
  ServedModel model = testing::byte_model();
  model.reasoning = engine::ReasoningEffortBudgets{.low = 10, .medium = 20, .high = 30};
  return model;
}

const char* kMessages = R"("messages": [{"role": "user", "content": "Hi"}])";

TEST(ReasoningApiTest, BudgetsReachTheEngineRequest) {
  const ServedModel model = thinking_model();
  auto parse = [&](const std::string& extra) {
    return parse_chat_request(json("{" + std::string(kMessages) + extra + "}"), model);
  };
  auto job = parse(R"(, "max_reasoning_tokens": 7)");
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->requests[0].max_reasoning_tokens, 7);
  EXPECT_TRUE(job->requests[0].separate_reasoning);
  EXPECT_TRUE(job->response.reasoning);
  for (const auto& [effort, budget] : std::vector<std::pair<std::string, std::int64_t>>{
           {"low", 10}, {"medium", 20}, {"high", 30}}) {
    auto j = parse(R"(, "reasoning_effort": ")" + effort + "\"");
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->requests[0].max_reasoning_tokens, budget) << effort;
  }
  // The explicit number wins over the effort.
  EXPECT_EQ(parse(R"(, "reasoning_effort": "high", "max_reasoning_tokens": 3)")
                ->requests[0]
                .max_reasoning_tokens,
            3);
  EXPECT_FALSE(parse("")->requests[0].max_reasoning_tokens.has_value());

  auto bad = parse(R"(, "reasoning_effort": "extreme")");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "reasoning_effort");
  bad = parse(R"(, "max_reasoning_tokens": -1)");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "max_reasoning_tokens");
}

TEST(ReasoningApiTest, ModelsThatDoNotThinkRefuseBudgets) {
  const ServedModel plain = testing::byte_model();
  for (const char* extra : {R"(, "max_reasoning_tokens": 5)", R"(, "reasoning_effort": "low")"}) {
    auto job = parse_chat_request(json("{" + std::string(kMessages) + extra + "}"), plain);
    ASSERT_FALSE(job.ok()) << extra;
    EXPECT_EQ(job.error().http_status, 400);
  }
  auto job = parse_chat_request(json("{" + std::string(kMessages) + "}"), plain);
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->requests[0].separate_reasoning);
  EXPECT_FALSE(job->response.reasoning);
}

TEST(ReasoningApiTest, CompletionsKeepTheRawTextButMayBudget) {
  const ServedModel model = thinking_model();
  auto job = parse_completion_request(json(R"({"prompt": "x", "max_reasoning_tokens": 4})"), model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->requests[0].max_reasoning_tokens, 4);
  EXPECT_FALSE(job->requests[0].separate_reasoning);
}

TEST(ReasoningApiTest, TraceFieldAsksForATrace) {
  const ServedModel model = testing::byte_model();
  auto job = parse_chat_request(json("{" + std::string(kMessages) + R"(, "trace": true})"), model);
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->requests[0].trace);
  EXPECT_FALSE(
      parse_chat_request(json("{" + std::string(kMessages) + R"(, "trace": "yes"})"), model).ok());
}

engine::StreamOutput output(std::string reasoning, std::string text, bool finished) {
  engine::StreamOutput out;
  out.output.reasoning_text = std::move(reasoning);
  out.output.text = std::move(text);
  if (finished) {
    out.output.finished = true;
    out.output.status = engine::RequestStatus::kFinishedLength;
    out.output.usage = {
        .num_prompt_tokens = 3, .num_completion_tokens = 9, .num_reasoning_tokens = 6};
  }
  return out;
}

ResponseOptions chat_options(bool stream) {
  ResponseOptions o;
  o.endpoint = ApiEndpoint::kChatCompletions;
  o.id = "chatcmpl-r";
  o.model = "test-model";
  o.stream = stream;
  o.include_usage = stream;
  o.reasoning = true;
  o.num_prompt_tokens = {3};
  o.echo_texts = {""};
  return o;
}

// The JSON payloads of "data: ..." events, [DONE] left out.
std::vector<Json> payloads(const std::string& sse) {
  std::vector<Json> out;
  for (std::size_t at = 0; at < sse.size();) {
    const std::size_t end = sse.find("\n\n", at);
    const std::string payload = sse.substr(at + 6, end - at - 6);
    if (payload != "[DONE]") out.push_back(Json::parse(payload));
    at = end + 2;
  }
  return out;
}

TEST(ReasoningApiTest, StreamedDeltasCarryReasoningContent) {
  ResponseEncoder encoder(chat_options(true), engine::make_byte_tokenizer());
  std::string sse = encoder.add(0, output("Let me see", "", false));
  sse += encoder.add(0, output(" 2+2", "It is", false));
  sse += encoder.add(0, output("", " 4.", true));
  sse += encoder.finish_stream();
  const std::vector<Json> e = payloads(sse);
  ASSERT_EQ(e.size(), 5u) << sse;  // role, 3 deltas, usage
  EXPECT_EQ(e[1]["choices"][0]["delta"], json(R"({"reasoning_content": "Let me see"})"));
  EXPECT_EQ(e[2]["choices"][0]["delta"],
            json(R"({"reasoning_content": " 2+2", "content": "It is"})"));
  EXPECT_EQ(e[3]["choices"][0]["delta"], json(R"({"content": " 4."})"));
  EXPECT_EQ(e[4]["usage"]["completion_tokens_details"]["reasoning_tokens"], 6);
}

TEST(ReasoningApiTest, MessageCarriesReasoningContent) {
  ResponseEncoder encoder(chat_options(false), engine::make_byte_tokenizer());
  encoder.add(0, output("think", "", false));
  encoder.add(0, output("ing", "Answer", true));
  const Json body = Json::parse(encoder.finish_body().body);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "thinking");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Answer");
  EXPECT_EQ(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 6);
}

}  // namespace
}  // namespace pagoda::api
