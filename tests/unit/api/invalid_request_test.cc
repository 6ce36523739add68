// Bad input, one case per row: every malformed body gets the right HTTP status, OpenAI error
// type and `param`, through the same path a frontend uses (parse_request_body, then the
// endpoint's validator).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/request_body.h"
#include "api/tokenize_api.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

enum class Endpoint { kChat, kCompletion, kTokenize, kDetokenize };

struct BadInput {
  const char* name;
  Endpoint endpoint;
  std::string body;
  int http_status;
  const char* param;  // nullptr: the error names no parameter
  const char* message_has = "";
};

const std::string kUser = R"("messages": [{"role": "user", "content": "Hi"}])";

std::string chat(const std::string& fields) {
  return "{" + kUser + (fields.empty() ? "" : ", " + fields) + "}";
}
std::string completion(const std::string& fields) {
  return R"({"prompt": "Hi")" + (fields.empty() ? "" : ", " + fields) + "}";
}
std::string many_stops(int count) {
  std::string list = "[";
  for (int i = 0; i < count; ++i) list += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return list + "]";
}

std::vector<BadInput> bad_inputs() {
  const Endpoint C = Endpoint::kChat;
  const Endpoint P = Endpoint::kCompletion;
  return {
      {"truncated_json", C, R"({"messages": [{"role": "user")", 400, nullptr, "not valid JSON"},
      {"invalid_utf8", C, "{\"messages\": [{\"role\": \"user\", \"content\": \"\xFF\"}]}", 400,
       nullptr, "UTF-8"},
      {"overlong_utf8", P, "{\"prompt\": \"\xC0\xAF\"}", 400, nullptr, "UTF-8"},
      {"top_level_array", C, "[1, 2]", 400, nullptr, "JSON object"},
      {"empty_body", P, "", 400, nullptr, "not valid JSON"},
      {"trailing_garbage", P, R"({"prompt": "Hi"} x)", 400, nullptr, "not valid JSON"},
      {"messages_missing", C, R"({"model": "test-model"})", 400, "messages", "required"},
      {"messages_empty", C, R"({"messages": []})", 400, "messages", "at least one"},
      {"messages_not_list", C, R"({"messages": "hi"})", 400, "messages", "got string"},
      {"message_not_object", C, R"({"messages": [42]})", 400, "messages[0]", "object"},
      {"unknown_role", C, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400,
       "messages[0].role", "wizard"},
      {"role_missing", C, R"({"messages": [{"content": "x"}]})", 400, "messages[0].role",
       "required"},
      {"role_not_string", C, R"({"messages": [{"role": 7, "content": "x"}]})", 400,
       "messages[0].role", "string"},
      {"user_content_missing", C, R"({"messages": [{"role": "user"}]})", 400, "messages[0].content",
       "required"},
      {"content_number", C, R"({"messages": [{"role": "user", "content": 42}]})", 400,
       "messages[0].content", "got number"},
      {"image_part", C,
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       400, "messages[0].content[0].type", "image_url"},
      {"text_part_without_text", C,
       R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", 400,
       "messages[0].content[0].text", "required"},
      {"tool_calls_on_user", C,
       R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", 400,
       "messages[0].tool_calls", "assistant"},
      {"tool_call_arguments_not_json", C,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
           "tool_calls": [{"id": "1", "type": "function",
                           "function": {"name": "f", "arguments": "{oops"}}]}]})",
       400, "messages[1].tool_calls[0].function.arguments", "JSON"},
      {"unknown_model", C, chat(R"("model": "gpt-9")"), 404, "model", "gpt-9"},
      {"model_not_string", C, chat(R"("model": 5)"), 400, "model", "string"},
      {"temperature_string", C, chat(R"("temperature": "hot")"), 400, "temperature", "number"},
      {"temperature_negative", C, chat(R"("temperature": -0.5)"), 400, "temperature", "-0.5"},
      {"temperature_too_high", C, chat(R"("temperature": 2.5)"), 400, "temperature", "[0, 2]"},
      {"number_overflow", C, chat(R"("temperature": 1e999)"), 400, nullptr, "overflow"},
      {"top_p_zero", C, chat(R"("top_p": 0)"), 400, "top_p", "(0, 1]"},
      {"top_p_above_one", C, chat(R"("top_p": 1.5)"), 400, "top_p", "1.5"},
      {"top_k_below_minus_one", C, chat(R"("top_k": -5)"), 400, "top_k", "at least -1"},
      {"top_k_fraction", C, chat(R"("top_k": 1.5)"), 400, "top_k", "integer"},
      {"min_p_above_one", C, chat(R"("min_p": 2)"), 400, "min_p", ""},
      {"presence_penalty_high", C, chat(R"("presence_penalty": 3)"), 400, "presence_penalty", ""},
      {"frequency_penalty_low", C, chat(R"("frequency_penalty": -2.5)"), 400, "frequency_penalty",
       ""},
      {"repetition_penalty_zero", C, chat(R"("repetition_penalty": 0)"), 400, "repetition_penalty",
       "> 0"},
      {"n_zero", C, chat(R"("n": 0)"), 400, "n", "at least 1"},
      {"n_huge", C, chat(R"("n": 1000)"), 400, "n", "at most 128"},
      {"n_string", C, chat(R"("n": "2")"), 400, "n", "integer"},
      {"max_tokens_zero", C, chat(R"("max_tokens": 0)"), 400, "max_tokens", "at least 1"},
      {"max_tokens_negative", C, chat(R"("max_tokens": -5)"), 400, "max_tokens", "-5"},
      {"max_tokens_huge", C, chat(R"("max_tokens": 1e30)"), 400, "max_tokens", "too large"},
      {"max_tokens_bool", C, chat(R"("max_tokens": true)"), 400, "max_tokens", "boolean"},
      {"max_tokens_over_context", C, chat(R"("max_tokens": 1000)"), 400, "max_tokens",
       "maximum context length is 64 tokens. However, you requested 1021 tokens (21 in the "
       "messages, 1000 in the completion)"},
      {"max_completion_tokens_over_context", C, chat(R"("max_completion_tokens": 50)"), 400,
       "max_completion_tokens", "71 tokens"},
      {"logprobs_string", C, chat(R"("logprobs": "yes")"), 400, "logprobs", "boolean"},
      {"top_logprobs_too_many", C, chat(R"("logprobs": true, "top_logprobs": 21)"), 400,
       "top_logprobs", "at most 20"},
      {"top_logprobs_without_logprobs", C, chat(R"("top_logprobs": 2)"), 400, "top_logprobs",
       "'logprobs'"},
      {"stop_number", C, chat(R"("stop": 5)"), 400, "stop", "string or a list"},
      {"stop_empty_string", C, chat(R"("stop": [""])"), 400, "stop", "empty"},
      {"stop_list_of_numbers", C, chat(R"("stop": [1, 2])"), 400, "stop", "number"},
      {"stop_too_many", C, chat("\"stop\": " + many_stops(65)), 400, "stop", "at most 64"},
      {"seed_string", C, chat(R"("seed": "abc")"), 400, "seed", "integer"},
      {"seed_fraction", C, chat(R"("seed": 1.5)"), 400, "seed", "integer"},
      {"logit_bias_bad_key", C, chat(R"("logit_bias": {"abc": 1})"), 400, "logit_bias", "abc"},
      {"logit_bias_value_range", C, chat(R"("logit_bias": {"5": 200})"), 400, "logit_bias",
       "[-100, 100]"},
      {"logit_bias_outside_vocab", C, chat(R"("logit_bias": {"99999": 1})"), 400, "logit_bias",
       "vocabulary"},
      {"logit_bias_list", C, chat(R"("logit_bias": [])"), 400, "logit_bias", "object"},
      {"stream_string", C, chat(R"("stream": "true")"), 400, "stream", "boolean"},
      {"stream_options_without_stream", C, chat(R"("stream_options": {"include_usage": true})"),
       400, "stream_options", "stream"},
      {"include_usage_string", C,
       chat(R"("stream": true, "stream_options": {"include_usage": "yes"})"), 400,
       "stream_options.include_usage", "boolean"},
      {"min_tokens_negative", C, chat(R"("min_tokens": -1)"), 400, "min_tokens", ""},
      {"min_tokens_over_max_tokens", C, chat(R"("min_tokens": 10, "max_tokens": 5)"), 400,
       "min_tokens", "(5)"},
      {"stop_token_ids_negative", C, chat(R"("stop_token_ids": [-1])"), 400, "stop_token_ids", ""},
      {"ignore_eos_number", C, chat(R"("ignore_eos": 1)"), 400, "ignore_eos", "boolean"},
      {"response_format_unknown_type", C, chat(R"("response_format": {"type": "xml"})"), 400,
       "response_format.type", "\"xml\""},
      {"tool_choice_required", C, chat(R"("tool_choice": "required")"), 400, "tool_choice", ""},
      {"user_number", C, chat(R"("user": 5)"), 400, "user", "string"},
      {"continue_final_after_user", C,
       chat(R"("continue_final_message": true, "add_generation_prompt": false)"), 400,
       "continue_final_message", "assistant"},
      {"chat_prompt_too_long", C,
       R"({"messages": [{"role": "user", "content": ")" + std::string(80, 'x') + R"("}]})", 400,
       "messages", "99 input tokens"},
      {"prompt_missing", P, R"({"max_tokens": 5})", 400, "prompt", "required"},
      {"prompt_number", P, R"({"prompt": 5})", 400, "prompt", "got number"},
      {"prompt_empty_list", P, R"({"prompt": []})", 400, "prompt", "empty"},
      {"prompt_empty_string", P, R"({"prompt": ""})", 400, "prompt", "empty"},
      {"prompt_empty_token_list", P, R"({"prompt": [[]]})", 400, "prompt[0]", "empty"},
      {"prompt_token_outside_vocab", P, R"({"prompt": [1, 99999]})", 400, "prompt", "99999"},
      {"prompt_negative_token", P, R"({"prompt": [-1]})", 400, "prompt", "-1"},
      {"prompt_mixed_list", P, R"({"prompt": ["a", 5]})", 400, "prompt[1]", "number"},
      {"prompt_logprobs_too_many", P, completion(R"("prompt_logprobs": 21)"), 400,
       "prompt_logprobs", "at most 20"},
      {"max_tokens_zero_without_echo", P, completion(R"("max_tokens": 0)"), 400, "max_tokens", "0"},
      {"completion_logprobs_too_many", P, completion(R"("logprobs": 21)"), 400, "logprobs",
       "at most 20"},
      {"completion_logprobs_bool", P, completion(R"("logprobs": true)"), 400, "logprobs",
       "integer"},
      {"suffix", P, completion(R"("suffix": "end")"), 400, "suffix", "not supported"},
      {"best_of", P, completion(R"("best_of": 3)"), 400, "best_of", ""},
      {"completion_over_context", P, completion(R"("max_tokens": 63)"), 400, "max_tokens",
       "65 tokens (2 in the prompt, 63 in the completion)"},
      {"completion_prompt_too_long", P, R"({"prompt": ")" + std::string(64, 'x') + R"("})", 400,
       "prompt", "64 input tokens"},
      {"completion_unknown_model", P, completion(R"("model": "other")"), 404, "model", ""},
      {"tokenize_neither", Endpoint::kTokenize, R"({"model": "test-model"})", 400, "prompt", ""},
      {"tokenize_both", Endpoint::kTokenize, R"({"prompt": "a", "messages": []})", 400, "messages",
       ""},
      {"detokenize_outside_vocab", Endpoint::kDetokenize, R"({"tokens": [1, 300]})", 400, "tokens",
       "300"},
      {"detokenize_missing", Endpoint::kDetokenize, R"({})", 400, "tokens", "required"},
  };
}

class InvalidRequestTest : public ::testing::TestWithParam<BadInput> {};

ApiErrorOr<Json> run(Endpoint endpoint, const std::string& text, const ServedModel& model) {
  PAGODA_API_ASSIGN_OR_RETURN(Json body, parse_request_body(text));
  switch (endpoint) {
    case Endpoint::kChat: {
      PAGODA_API_ASSIGN_OR_RETURN(GenerationJob job, parse_chat_request(body, model));
      return Json(job.requests.size());
    }
    case Endpoint::kCompletion: {
      PAGODA_API_ASSIGN_OR_RETURN(GenerationJob job, parse_completion_request(body, model));
      return Json(job.requests.size());
    }
    case Endpoint::kTokenize: return tokenize_response(body, model);
    case Endpoint::kDetokenize: return detokenize_response(body, model);
  }
  return Json();
}

TEST_P(InvalidRequestTest, GetsTheRightStatusTypeAndParam) {
  static const ServedModel model = testing::byte_model();
  const BadInput& c = GetParam();
  const ApiErrorOr<Json> result = run(c.endpoint, c.body, model);
  ASSERT_FALSE(result.ok()) << "accepted: " << c.body;
  const ApiError& error = result.error();
  EXPECT_EQ(error.http_status, c.http_status) << error.message;
  EXPECT_EQ(error.type, c.http_status == 404 ? "not_found_error" : "invalid_request_error");
  if (c.param == nullptr) {
    EXPECT_FALSE(error.param.has_value()) << *error.param;
  } else {
    EXPECT_EQ(error.param.value_or("<none>"), c.param) << error.message;
  }
  EXPECT_NE(error.message.find(c.message_has), std::string::npos)
      << "message: " << error.message << "\nexpected to contain: " << c.message_has;
  // The body a transport sends is OpenAI's shape.
  const Json body = Json::parse(error.body());
  EXPECT_EQ(body["error"]["message"], error.message);
  EXPECT_EQ(body["error"]["code"], c.http_status);
}

INSTANTIATE_TEST_SUITE_P(BadInputs, InvalidRequestTest, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(InvalidRequestCountTest, AtLeastFortyDistinctCases) {
  EXPECT_GE(bad_inputs().size(), 40U);
}

TEST(InvalidRequestTest, ChatWithoutATemplateIsRefused) {
  const ServedModel model = testing::byte_model(/*with_template=*/false);
  auto job = parse_chat_request(testing::json(chat("")), model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().http_status, 400);
  EXPECT_NE(job.error().message.find("--chat-template"), std::string::npos);
}

TEST(InvalidRequestTest, UnknownFieldsAreIgnored) {
  const ServedModel model = testing::byte_model();
  auto job = parse_chat_request(
      testing::json(chat(R"("frobnicate": {"x": [1]}, "metadata": {"k": "v"}, "store": false)")),
      model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  auto completion_job =
      parse_completion_request(testing::json(completion(R"("whatever": 1)")), model);
  ASSERT_TRUE(completion_job.ok()) << completion_job.error().message;
}

}  // namespace
}  // namespace pagoda::api
