#include "api/chat_request.h"

#include <gtest/gtest.h>

#include "api/chat_prompt.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

using testing::json;

class ChatRequestTest : public ::testing::Test {
 protected:
  const ServedModel model_ = testing::byte_model();

  engine::EngineRequest parse_one(const std::string& body, ResponseOptions* response = nullptr) {
    auto job = parse_chat_request(json(body), model_, {.id = "chatcmpl-test", .created = 7});
    EXPECT_TRUE(job.ok()) << job.error().message;
    if (!job.ok()) return {};
    EXPECT_EQ(job->requests.size(), 1U);
    if (response != nullptr) *response = job->response;
    return job->requests.front();
  }
};

TEST_F(ChatRequestTest, DefaultsFollowOpenAi) {
  ResponseOptions response;
  const engine::EngineRequest r =
      parse_one(R"({"messages": [{"role": "user", "content": "Hi"}]})", &response);
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.sampling.top_p, 1.0);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.min_p, 0.0);
  EXPECT_EQ(r.sampling.n, 1);
  EXPECT_FALSE(r.sampling.seed.has_value());
  EXPECT_FALSE(r.sampling.logprobs.has_value());
  EXPECT_TRUE(r.sampling.logit_bias.empty());
  EXPECT_FALSE(r.max_tokens.has_value()) << "unset max_tokens runs to the context limit";
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_FALSE(r.include_stop_str_in_output);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.request_id, "chatcmpl-test");

  EXPECT_EQ(response.endpoint, ApiEndpoint::kChatCompletions);
  EXPECT_EQ(response.model, "test-model");
  EXPECT_EQ(response.id, "chatcmpl-test");
  EXPECT_EQ(response.created, 7);
  EXPECT_FALSE(response.stream);
  EXPECT_FALSE(response.include_usage);
  EXPECT_FALSE(response.logprobs.has_value());
  ASSERT_EQ(response.num_prompt_tokens.size(), 1U);
  EXPECT_EQ(response.num_prompt_tokens[0], 21);
}

TEST_F(ChatRequestTest, PromptIsTheRenderedTemplateWithSpecialTokensAsIds) {
  const engine::EngineRequest r = parse_one(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  std::vector<std::int32_t> expected = {engine::kImStart};
  for (const char c : std::string("user\nHi")) expected.push_back(static_cast<unsigned char>(c));
  expected.push_back(engine::kEos);
  expected.push_back('\n');
  expected.push_back(engine::kImStart);
  for (const char c : std::string("assistant\n")) expected.push_back(c);
  EXPECT_EQ(r.prompt_token_ids, expected);
}

TEST_F(ChatRequestTest, EveryParameterReachesTheEngineRequest) {
  ResponseOptions response;
  const engine::EngineRequest r = parse_one(R"({
      "model": "alias",
      "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
      "stream": true, "stream_options": {"include_usage": true},
      "n": 3, "max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
      "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1,
      "logit_bias": {"65": -100, "66": 2.5}, "logprobs": true, "top_logprobs": 5,
      "seed": -1, "stop": ["\n\n", "END"], "user": "someone",
      "min_tokens": 2, "ignore_eos": true, "stop_token_ids": [3, 4],
      "skip_special_tokens": false, "include_stop_str_in_output": true,
      "priority": -2, "cache_salt": "tenant-a"})",
                                            &response);
  EXPECT_EQ(response.model, "alias") << "the response names the model the client asked for";
  EXPECT_TRUE(response.stream);
  EXPECT_TRUE(response.include_usage);
  EXPECT_EQ(response.n, 3);
  EXPECT_EQ(response.logprobs, 5);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.sampling.n, 3);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.sampling.temperature, 0.5);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.25);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(r.sampling.logit_bias, (std::map<std::int32_t, double>{{65, -100.0}, {66, 2.5}}));
  EXPECT_EQ(r.sampling.logprobs, 5);
  EXPECT_EQ(r.sampling.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.sampling.min_tokens, 2);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.stop_token_ids, (std::vector<std::int32_t>{3, 4}));
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_EQ(r.priority, -2);
  EXPECT_EQ(r.cache_salt, "tenant-a");
  EXPECT_TRUE(r.sampling.validate(model_.vocab_size).ok());
}

TEST_F(ChatRequestTest, NullMeansUnsetAndStopMayBeAString) {
  const engine::EngineRequest r = parse_one(R"({
      "messages": [{"role": "user", "content": "Hi"}], "temperature": null, "max_tokens": null,
      "stop": "x", "seed": 18446744073709551615, "top_k": -1, "max_completion_tokens": 3})");
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.sampling.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.sampling.top_k, -1);
  EXPECT_EQ(r.max_tokens, 3);
}

TEST_F(ChatRequestTest, LogprobsWithoutTopLogprobsAsksForNoAlternatives) {
  ResponseOptions response;
  const engine::EngineRequest r = parse_one(
      R"({"messages": [{"role": "user", "content": "Hi"}], "logprobs": true})", &response);
  EXPECT_EQ(r.sampling.logprobs, 0);
  EXPECT_EQ(response.logprobs, 0);
}

TEST_F(ChatRequestTest, MaxTokensMayFillTheContextExactly) {
  // 21 prompt tokens + 43 = 64 = max_model_len.
  const engine::EngineRequest r =
      parse_one(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 43})");
  EXPECT_EQ(r.max_tokens, 43);
}

TEST_F(ChatRequestTest, GenerationConfigSuppliesDefaultsTheRequestCanOverride) {
  ServedModel model = testing::byte_model();
  model.generation.temperature = 0.3;
  model.generation.top_k = 20;
  model.generation.max_new_tokens = 10;
  auto job = parse_chat_request(json(R"({"messages": [{"role": "user", "content": "Hi"}],
                                         "top_k": 5})"),
                                model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->requests[0].sampling.temperature, 0.3);
  EXPECT_EQ(job->requests[0].sampling.top_k, 5);
  EXPECT_EQ(job->requests[0].max_tokens, 10);
}

TEST_F(ChatRequestTest, GeneratedIdsAreUniqueAndPrefixed) {
  const Json body = json(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  auto a = parse_chat_request(body, model_);
  auto b = parse_chat_request(body, model_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->response.id.rfind("chatcmpl-", 0), 0U);
  EXPECT_EQ(a->response.id.size(), 9U + 32U);
  EXPECT_NE(a->response.id, b->response.id);
  EXPECT_GT(a->response.created, 1700000000);
}

TEST(ChatPromptTest, ContentPartsJoinAndDeveloperIsSystem) {
  const ServedModel model = testing::byte_model();
  auto text = render_chat_prompt(json(R"({"messages": [
      {"role": "developer", "content": "D"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}]})"),
                                 model);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "<|im_start|>system\nD<|eos|>\n<|im_start|>user\na\nb<|eos|>\n"
            "<|im_start|>assistant\n<|eos|>\n<|im_start|>tool\n42<|eos|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatPromptTest, ContinueFinalMessageEndsTheTextInsideIt) {
  const ServedModel model = testing::byte_model();
  auto text = render_chat_prompt(json(R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Once upon"}], "continue_final_message": true,
      "add_generation_prompt": false})"),
                                 model);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "<|im_start|>user\nHi<|eos|>\n<|im_start|>assistant\nOnce upon");
}

TEST(ChatPromptTest, TemplateErrorsAreBadRequests) {
  ServedModel model = testing::byte_model();
  model.chat_template = *ChatTemplate::compile(
      "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}");
  auto text =
      render_chat_prompt(json(R"({"messages": [{"role": "user", "content": "x"}]})"), model);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().http_status, 400);
  EXPECT_EQ(text.error().param, "messages");
  EXPECT_NE(text.error().message.find("system first"), std::string::npos);
}

// The real default model: its own template, rendered as transformers renders it (golden data
// from tests/golden/template/make_golden.py), and tokenized with its real tokenizer.
TEST(ChatRequestSmolLm2Test, RendersAndTokenizesTheDefaultModelsChat) {
  const ServedModel* model = testing::smollm2_model();
  if (model == nullptr) GTEST_SKIP() << testing::kSmolLm2Path << " is absent: run scripts/setup.sh";
  const Json body = json(R"({"messages": [{"role": "user", "content": "Hello! How are you?"}]})");
  auto text = render_chat_prompt(body, *model);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHello! How are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto job = parse_chat_request(body, *model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  const std::vector<std::int32_t>& ids = job->requests[0].prompt_token_ids;
  const auto im_start = model->tokenizer->piece_to_token("<|im_start|>");
  ASSERT_TRUE(im_start.has_value());
  EXPECT_EQ(ids.front(), *im_start) << "chat markers become their special ids";
  EXPECT_EQ(model->tokenizer->decode(ids), *text);
}

}  // namespace
}  // namespace pagoda::api
