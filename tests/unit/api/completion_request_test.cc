#include "api/completion_request.h"

#include <gtest/gtest.h>

#include "api_test_models.h"

namespace pagoda::api {
namespace {

using testing::json;

class CompletionRequestTest : public ::testing::Test {
 protected:
  const ServedModel model_ = testing::byte_model();

  GenerationJob parse(const std::string& body) {
    auto job = parse_completion_request(json(body), model_, {.id = "cmpl-t", .created = 1});
    EXPECT_TRUE(job.ok()) << job.error().message;
    return job.ok() ? std::move(*job) : GenerationJob{};
  }
};

TEST_F(CompletionRequestTest, StringPromptWithOpenAiDefaults) {
  const GenerationJob job = parse(R"({"prompt": "Hi"})");
  ASSERT_EQ(job.requests.size(), 1U);
  const engine::EngineRequest& r = job.requests[0];
  EXPECT_EQ(r.prompt_token_ids, (std::vector<std::int32_t>{'H', 'i'}));
  EXPECT_EQ(r.max_tokens, 16) << "OpenAI's completions default";
  EXPECT_EQ(r.request_id, "cmpl-t");
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(job.response.endpoint, ApiEndpoint::kCompletions);
  EXPECT_FALSE(job.response.echo);
  EXPECT_FALSE(job.response.logprobs.has_value());
  EXPECT_EQ(job.response.num_prompt_tokens, std::vector<std::int64_t>{2});
}

TEST_F(CompletionRequestTest, DefaultMaxTokensShrinksToTheRoomLeft) {
  const GenerationJob job = parse(R"({"prompt": ")" + std::string(60, 'a') + R"("})");
  EXPECT_EQ(job.requests[0].max_tokens, 4);
}

TEST_F(CompletionRequestTest, SpecialTokenTextInAPromptStaysText) {
  const GenerationJob job = parse(R"({"prompt": "<|eos|>"})");
  EXPECT_EQ(job.requests[0].prompt_token_ids.size(), 7U);
}

TEST_F(CompletionRequestTest, ListOfStringsIsOneRequestPerPrompt) {
  const GenerationJob job = parse(R"({"prompt": ["a", "bc", "def"], "n": 2, "echo": true})");
  ASSERT_EQ(job.requests.size(), 3U);
  EXPECT_EQ(job.requests[0].request_id, "cmpl-t-0");
  EXPECT_EQ(job.requests[2].request_id, "cmpl-t-2");
  EXPECT_EQ(job.requests[1].prompt_token_ids, (std::vector<std::int32_t>{'b', 'c'}));
  EXPECT_EQ(job.requests[1].sampling.n, 2);
  EXPECT_EQ(job.response.n, 2);
  EXPECT_EQ(job.response.num_prompt_tokens, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(job.response.echo_texts, (std::vector<std::string>{"a", "bc", "def"}));
}

TEST_F(CompletionRequestTest, TokenIdPrompts) {
  const GenerationJob one = parse(R"({"prompt": [72, 105], "echo": true})");
  ASSERT_EQ(one.requests.size(), 1U);
  EXPECT_EQ(one.requests[0].prompt_token_ids, (std::vector<std::int32_t>{72, 105}));
  EXPECT_EQ(one.response.echo_texts, std::vector<std::string>{"Hi"});
  const GenerationJob many = parse(R"({"prompt": [[72], [105, 33]]})");
  ASSERT_EQ(many.requests.size(), 2U);
  EXPECT_EQ(many.requests[1].prompt_token_ids, (std::vector<std::int32_t>{105, 33}));
}

TEST_F(CompletionRequestTest, IntegerLogprobsAndSharedSamplingFields) {
  const GenerationJob job = parse(R"({"prompt": "Hi", "logprobs": 3, "max_tokens": 5,
      "temperature": 0, "stop": "\n", "seed": 7, "top_k": 3, "best_of": 1, "suffix": null})");
  const engine::EngineRequest& r = job.requests[0];
  EXPECT_EQ(job.response.logprobs, 3);
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.0);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.sampling.seed, 7U);
  EXPECT_EQ(r.sampling.top_k, 3);
}

TEST_F(CompletionRequestTest, TooManyPrompts) {
  std::string prompts = "[";
  for (std::size_t i = 0; i <= kMaxPromptsPerRequest; ++i) prompts += i ? ",\"a\"" : "\"a\"";
  auto job = parse_completion_request(json(R"({"prompt": )" + prompts + "]}"), model_);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().param, "prompt");
}

TEST_F(CompletionRequestTest, EchoWithLogprobsAsksTheEngineForPromptLogprobs) {
  // lm-evaluation-harness's loglikelihood request: token ids, echo, logprobs 1, max_tokens 1.
  const GenerationJob job =
      parse(R"({"prompt": [[72, 105], [66]], "echo": true, "logprobs": 1, "max_tokens": 1})");
  ASSERT_EQ(job.requests.size(), 2U);
  for (const engine::EngineRequest& r : job.requests) {
    EXPECT_EQ(r.sampling.prompt_logprobs, 1);
    EXPECT_EQ(r.sampling.logprobs, 1);
  }
  EXPECT_TRUE(job.response.echo_logprobs);
  EXPECT_FALSE(job.response.prompt_logprobs);
  EXPECT_EQ(job.response.first_prompt_tokens, (std::vector<std::int32_t>{72, 66}));
  EXPECT_FALSE(job.response.drop_generated);
}

TEST_F(CompletionRequestTest, PromptLogprobsTakeTheLargerCount) {
  const GenerationJob a = parse(R"({"prompt": "Hi", "prompt_logprobs": 5})");
  EXPECT_EQ(a.requests[0].sampling.prompt_logprobs, 5);
  EXPECT_EQ(a.response.prompt_logprobs, 5);
  EXPECT_FALSE(a.response.echo_logprobs) << "no echo: the completion's logprobs stay its own";
  const GenerationJob b =
      parse(R"({"prompt": "Hi", "prompt_logprobs": 2, "echo": true, "logprobs": 7})");
  EXPECT_EQ(b.requests[0].sampling.prompt_logprobs, 7);
  const GenerationJob c = parse(R"({"prompt": "Hi", "logprobs": 3})");
  EXPECT_FALSE(c.requests[0].sampling.prompt_logprobs) << "logprobs alone score no prompt";
}

TEST_F(CompletionRequestTest, MaxTokensZeroWithEchoGeneratesOneTokenToDrop) {
  const GenerationJob job = parse(R"({"prompt": "Hi", "echo": true, "max_tokens": 0})");
  EXPECT_TRUE(job.response.drop_generated);
  EXPECT_EQ(job.requests[0].max_tokens, 1);
}

}  // namespace
}  // namespace pagoda::api
