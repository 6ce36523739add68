// gRPC requests reach the engine through the HTTP API's validator: every proto field must land
// in the engine request as the same JSON field would, unset fields must take the HTTP defaults,
// and invalid values must be refused with the HTTP API's messages.
#include "grpc/request_json.h"

#include <gtest/gtest.h>

#include <string>

#include "../api/api_test_models.h"
#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/structured_output.h"

namespace pagoda::grpc {
namespace {

using api::Json;

api::ApiErrorOr<api::GenerationJob> validate(const v1::GenerateRequest& request,
                                             const api::ServedModel& model) {
  api::ApiErrorOr<GenerateJson> json = generate_request_json(request);
  if (!json.ok()) return json.error();
  const api::RequestContext context{.id = request.request_id()};
  api::ApiErrorOr<api::GenerationJob> job =
      json->endpoint == api::ApiEndpoint::kChatCompletions
          ? api::parse_chat_request(json->body, model, context)
          : api::parse_completion_request(json->body, model, context);
  // Compiled as the Generate call does once the parser is through.
  if (!job.ok()) return job;
  if (std::optional<api::ApiError> error = api::compile_job_constraint(*job, model)) return *error;
  return job;
}

TEST(GenerateRequestJson, TextWritesOnlyTheFieldsThatWereSet) {
  v1::GenerateRequest request;
  request.set_text("hi");
  request.mutable_sampling()->set_temperature(0.0);  // set to zero: must be sent
  auto json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->endpoint, api::ApiEndpoint::kCompletions);
  EXPECT_EQ(json->body, Json::parse(R"({"prompt": "hi", "stream": true, "temperature": 0.0})"));
}

TEST(GenerateRequestJson, EveryFieldReachesTheEngineRequest) {
  const api::ServedModel model = api::testing::byte_model();
  v1::GenerateRequest request;
  request.set_request_id("client-id-1");
  request.set_model("alias");
  request.mutable_token_ids()->add_ids('a');
  request.mutable_token_ids()->add_ids('b');
  v1::SamplingParams& s = *request.mutable_sampling();
  s.set_temperature(0.5);
  s.set_top_p(0.9);
  s.set_top_k(7);
  s.set_min_p(0.05);
  s.set_presence_penalty(0.25);
  s.set_frequency_penalty(-0.5);
  s.set_repetition_penalty(1.1);
  (*s.mutable_logit_bias())[65] = -3.0;
  s.set_seed(18446744073709551615ULL);
  s.set_n(3);
  v1::StoppingCriteria& stop = *request.mutable_stopping();
  stop.set_max_tokens(9);
  stop.set_min_tokens(2);
  stop.add_stop("xy");
  stop.add_stop_token_ids(66);
  stop.set_include_stop_str_in_output(true);
  stop.set_ignore_eos(true);
  request.set_logprobs(4);
  request.set_skip_special_tokens(false);
  request.set_priority(-2);
  request.set_cache_salt("tenant-a");

  auto job = validate(request, model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  ASSERT_EQ(job->requests.size(), 1u);
  const engine::EngineRequest& r = job->requests[0];
  EXPECT_EQ(r.request_id, "client-id-1");
  EXPECT_EQ(r.prompt_token_ids, (std::vector<std::int32_t>{'a', 'b'}));
  EXPECT_EQ(r.sampling.temperature, 0.5);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.presence_penalty, 0.25);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(r.sampling.logit_bias, (std::map<std::int32_t, double>{{65, -3.0}}));
  EXPECT_EQ(r.sampling.seed, 18446744073709551615ULL);
  EXPECT_EQ(r.sampling.n, 3);
  EXPECT_EQ(r.sampling.min_tokens, 2);
  EXPECT_EQ(r.sampling.logprobs, 4);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"xy"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<std::int32_t>{66}));
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_EQ(r.priority, -2);
  EXPECT_EQ(r.cache_salt, "tenant-a");
  EXPECT_TRUE(r.stream);
}

TEST(GenerateRequestJson, ChatRendersWithTheTemplateAndSpellsLogprobsTheChatWay) {
  const api::ServedModel model = api::testing::byte_model();
  v1::GenerateRequest request;
  v1::ChatMessage& message = *request.mutable_chat()->add_messages();
  message.set_role("user");
  message.set_content("Hi");
  request.set_logprobs(2);
  auto json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->endpoint, api::ApiEndpoint::kChatCompletions);
  EXPECT_EQ(json->body["logprobs"], true);
  EXPECT_EQ(json->body["top_logprobs"], 2);

  auto job = validate(request, model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  auto http = api::parse_chat_request(
      Json::parse(R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true,
                      "logprobs": true, "top_logprobs": 2})"),
      model);
  ASSERT_TRUE(http.ok()) << http.error().message;
  EXPECT_EQ(job->requests[0].prompt_token_ids, http->requests[0].prompt_token_ids);
  EXPECT_EQ(job->requests[0].max_tokens, http->requests[0].max_tokens);
  EXPECT_EQ(job->requests[0].sampling.logprobs, 2);
}

TEST(GenerateRequestJson, ChatToolsAndKwargsBecomeJson) {
  v1::GenerateRequest request;
  v1::ChatInput& chat = *request.mutable_chat();
  v1::ChatMessage& call = *chat.add_messages();
  call.set_role("assistant");
  v1::ToolCall& tool_call = *call.add_tool_calls();
  tool_call.set_id("c1");
  tool_call.set_function_name("weather");
  tool_call.set_function_arguments(R"({"city": "Paris"})");
  google::protobuf::Struct& tool = *chat.add_tools();
  (*tool.mutable_fields())["type"].set_string_value("function");
  (*tool.mutable_fields())["function"].mutable_struct_value();
  google::protobuf::ListValue& list = *(*tool.mutable_fields())["tags"].mutable_list_value();
  list.add_values()->set_bool_value(true);
  list.add_values()->set_number_value(2.5);
  list.add_values()->set_null_value(google::protobuf::NULL_VALUE);
  (*chat.mutable_chat_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(false);
  chat.set_add_generation_prompt(false);

  auto json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->body["messages"][0], Json::parse(R"({"role": "assistant", "content": "",
      "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]})"));
  EXPECT_EQ(json->body["tools"],
            Json::parse(R"([{"function": {}, "tags": [true, 2.5, null], "type": "function"}])"));
  EXPECT_EQ(json->body["chat_template_kwargs"], Json::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(json->body["add_generation_prompt"], false);
}

// A map as large as a vocabulary becomes JSON without a key lookup per entry (which made it
// quadratic), and keys come out sorted as for a Struct.
TEST(GenerateRequestJson, ToolChoiceBecomesTheHttpToolChoice) {
  v1::GenerateRequest request;
  v1::ChatInput& chat = *request.mutable_chat();
  chat.add_messages()->set_role("user");
  chat.mutable_messages(0)->set_content("Weather?");
  google::protobuf::Struct& tool = *chat.add_tools();
  (*tool.mutable_fields())["type"].set_string_value("function");
  (*(*tool.mutable_fields())["function"].mutable_struct_value()->mutable_fields())["name"]
      .set_string_value("get_weather");
  auto json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_FALSE(json->body.contains("tool_choice"));
  EXPECT_FALSE(json->body.contains("parallel_tool_calls"));

  chat.mutable_tool_choice()->set_mode("required");
  chat.set_parallel_tool_calls(false);
  json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->body["tool_choice"], "required");
  EXPECT_EQ(json->body["parallel_tool_calls"], false);

  chat.mutable_tool_choice()->set_function_name("get_weather");
  json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->body["tool_choice"],
            Json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));

  // Through the shared validator: a forced call compiles its grammar, or the HTTP 400.
  api::ServedModel model = api::testing::byte_model();
  model.constraints = std::make_shared<structured::ConstraintCompiler>(
      *model.tokenizer, model.vocab_size, std::vector<std::int32_t>{});
  auto job = validate(request, model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_NE(job->requests[0].constraint, nullptr);
  ASSERT_TRUE(job->response.tool_calls.has_value());
  EXPECT_EQ(job->response.tool_calls->function_name, "get_weather");
  chat.mutable_tool_choice()->set_function_name("missing");
  job = validate(request, model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().param.value_or(""), "tool_choice");
  chat.mutable_tool_choice()->Clear();
  job = validate(request, model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().param.value_or(""), "tool_choice");
}

TEST(GenerateRequestJson, StructuredOutputBecomesTheHttpStructuredOutputs) {
  const auto body_of = [](const v1::StructuredOutput& so) {
    v1::GenerateRequest request;
    request.set_text("hi");
    *request.mutable_structured_output() = so;
    auto json = generate_request_json(request);
    EXPECT_TRUE(json.ok());
    return json.ok() ? json->body["structured_outputs"] : Json();
  };
  v1::StructuredOutput so;
  so.set_json_schema(R"({"type": "object"})");
  EXPECT_EQ(body_of(so), Json::parse(R"({"json": "{\"type\": \"object\"}"})"));
  so.set_json_object(true);
  EXPECT_EQ(body_of(so), Json::parse(R"({"json_object": true})"));
  so.set_regex("[0-9]+");
  EXPECT_EQ(body_of(so), Json::parse(R"({"regex": "[0-9]+"})"));
  so.mutable_choice()->add_choices("a");
  so.mutable_choice()->add_choices("b");
  EXPECT_EQ(body_of(so), Json::parse(R"({"choice": ["a", "b"]})"));
  so.set_grammar("root ::= \"a\"");
  EXPECT_EQ(body_of(so), Json::parse(R"({"grammar": "root ::= \"a\""})"));

  // Through the shared validator: compiled onto the request, or the HTTP 400.
  api::ServedModel model = api::testing::byte_model();
  model.constraints = std::make_shared<structured::ConstraintCompiler>(
      *model.tokenizer, model.vocab_size, std::vector<std::int32_t>{});
  v1::GenerateRequest request;
  request.set_text("hi");
  request.mutable_structured_output()->set_regex("[0-9]+");
  auto job = validate(request, model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_NE(job->requests[0].constraint, nullptr);
  request.mutable_structured_output()->set_regex("[0-9");
  job = validate(request, model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().code, StatusCode::kInvalidArgument);
  EXPECT_EQ(job.error().param.value_or(""), "structured_outputs.regex");
}

TEST(GenerateRequestJson, LargeMapsAndStructsKeepEveryKey) {
  v1::GenerateRequest request;
  request.set_text("hi");
  for (int id = 0; id < 49'152; ++id) (*request.mutable_sampling()->mutable_logit_bias())[id] = 1;
  google::protobuf::Struct& kwargs = *request.mutable_chat()->mutable_chat_template_kwargs();
  for (int i = 0; i < 50'000; ++i) {
    (*kwargs.mutable_fields())["k" + std::to_string(i)].set_number_value(i);
  }
  auto json = generate_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->body["logit_bias"].size(), 49'152u);
  EXPECT_EQ(json->body["logit_bias"]["49151"], 1.0);
  const Json& out = json->body["chat_template_kwargs"];
  ASSERT_EQ(out.size(), 50'000u);
  std::string previous;
  for (const auto& [key, value] : out.items()) {
    ASSERT_LT(previous, key);
    previous = key;
  }
  EXPECT_EQ(out["k49999"], 49999.0);
}

TEST(GenerateRequestJson, NoInputIsRefused) {
  v1::GenerateRequest request;
  auto json = generate_request_json(request);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.error().code, StatusCode::kInvalidArgument);
  EXPECT_EQ(json.error().param, "input");
}

TEST(GenerateRequestJson, RefusalsAreTheHttpApisOwn) {
  const api::ServedModel model = api::testing::byte_model();
  v1::GenerateRequest request;
  request.set_text("hello");
  request.mutable_sampling()->set_temperature(5.0);
  auto job = validate(request, model);
  ASSERT_FALSE(job.ok());
  auto http =
      api::parse_completion_request(Json::parse(R"({"prompt": "hello", "temperature": 5})"), model);
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(job.error().code, StatusCode::kInvalidArgument);
  EXPECT_EQ(job.error().message, http.error().message);
  EXPECT_EQ(job.error().param, "temperature");

  request.mutable_sampling()->clear_temperature();
  request.set_model("another-model");
  job = validate(request, model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().code, StatusCode::kNotFound);

  request.clear_model();
  (*request.mutable_sampling()->mutable_logit_bias())[-1] = 1.0;
  job = validate(request, model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().param, "logit_bias");
}

TEST(TokenizeRequestJson, TextAndChatAndNoInput) {
  v1::TokenizeRequest request;
  request.set_text("abc");
  request.set_add_special_tokens(false);
  auto json = tokenize_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, Json::parse(R"({"prompt": "abc", "add_special_tokens": false,
                                   "return_token_strs": false})"));
  request.clear_text();
  EXPECT_FALSE(tokenize_request_json(request).ok());
  v1::ChatMessage& message = *request.mutable_chat()->add_messages();
  message.set_role("user");
  message.set_content("x");
  json = tokenize_request_json(request);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["messages"], Json::parse(R"([{"role": "user", "content": "x"}])"));
}

TEST(DetokenizeRequestJson, IdsAndModel) {
  v1::DetokenizeRequest request;
  request.add_token_ids(1);
  request.add_token_ids(2);
  request.set_model("m");
  EXPECT_EQ(detokenize_request_json(request), Json::parse(R"({"tokens": [1, 2], "model": "m"})"));
}

}  // namespace
}  // namespace pagoda::grpc
