#include "api/tokenize_api.h"

#include <gtest/gtest.h>

#include "api/model_list.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

using testing::json;

TEST(TokenizeApiTest, PromptTokensWithVllmShape) {
  const ServedModel model = testing::byte_model();
  auto response = tokenize_response(json(R"({"model": "alias", "prompt": "Hi",
                                             "return_token_strs": true})"),
                                    model);
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ(*response, json(R"({"count": 2, "max_model_len": 64, "tokens": [72, 105],
                               "token_strs": ["H", "i"]})"));
  auto plain = tokenize_response(json(R"({"prompt": "a b"})"), model);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)["token_strs"].is_null());
  EXPECT_EQ((*plain)["tokens"], json("[97, 32, 98]"));
}

TEST(TokenizeApiTest, MessagesAreRenderedWithTheChatTemplate) {
  const ServedModel model = testing::byte_model();
  auto response = tokenize_response(
      json(R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false})"),
      model);
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ((*response)["count"], 10);  // <|im_start|> "user\nHi" <|eos|> "\n"
  EXPECT_EQ((*response)["tokens"][0], engine::kImStart);
}

TEST(TokenizeApiTest, DetokenizeRoundTrips) {
  const ServedModel model = testing::byte_model();
  auto response = detokenize_response(json(R"({"tokens": [72, 105, 257]})"), model);
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ(*response, json(R"({"prompt": "Hi<|im_start|>"})"));
  auto unknown = detokenize_response(json(R"({"model": "x", "tokens": []})"), model);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().http_status, 404);
}

TEST(TokenizeApiTest, SmolLm2TokenizeMatchesTheTokenizer) {
  const ServedModel* model = testing::smollm2_model();
  if (model == nullptr) GTEST_SKIP() << testing::kSmolLm2Path << " is absent: run scripts/setup.sh";
  auto response = tokenize_response(json(R"({"prompt": "Hello world"})"), *model);
  ASSERT_TRUE(response.ok()) << response.error().message;
  const std::vector<std::int32_t> expected = model->tokenizer->encode("Hello world");
  EXPECT_EQ((*response)["tokens"], Json(expected));
  EXPECT_EQ((*response)["max_model_len"], 2048);
}

TEST(ModelListTest, ListsEveryServedNameFirstFirst) {
  ServedModel model = testing::byte_model();
  model.created = 1700000000;
  const Json list = models_response(model);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 2U);
  EXPECT_EQ(list["data"][0], json(R"({"id": "test-model", "object": "model",
      "created": 1700000000, "owned_by": "pagoda", "root": "/models/test", "parent": null,
      "max_model_len": 64, "permission": []})"));
  EXPECT_EQ(list["data"][1]["id"], "alias");
  auto one = model_response(model, "alias");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)["id"], "alias");
  auto missing = model_response(model, "gpt-4");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().http_status, 404);
  EXPECT_EQ(missing.error().message, "The model `gpt-4` does not exist.");
}

TEST(ModelListTest, VersionIsTheProjectVersion) {
  EXPECT_EQ(version_response(), json(R"({"version": "0.1.0"})"));
}

TEST(ServedModelTest, RefusesAnUnusableConfiguration) {
  std::shared_ptr<const Tokenizer> tokenizer = engine::make_byte_tokenizer();
  EXPECT_FALSE(make_served_model({}, "", tokenizer, std::nullopt, 64).ok());
  EXPECT_FALSE(make_served_model({""}, "", tokenizer, std::nullopt, 64).ok());
  EXPECT_FALSE(make_served_model({"m"}, "", nullptr, std::nullopt, 64).ok());
  EXPECT_FALSE(make_served_model({"m"}, "", tokenizer, std::nullopt, 1).ok());
  auto model = make_served_model({"m"}, "", tokenizer, std::nullopt, 64);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->vocab_size, 259);
  EXPECT_EQ(model->eos_token, "");  // the byte tokenizer names no EOS
}

// What lm-evaluation-harness's remote tokenizer reads: eos_token (it must be there), the
// template source, and the limits.
TEST(TokenizeApiTest, TokenizerInfoInVllmShape) {
  const ServedModel model = testing::byte_model();
  const auto info = tokenizer_info_response(model);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ((*info)["eos_token"], model.eos_token.empty() ? Json(nullptr) : Json(model.eos_token));
  EXPECT_EQ((*info)["bos_token"], model.bos_token.empty() ? Json(nullptr) : Json(model.bos_token));
  EXPECT_EQ((*info)["chat_template"], model.chat_template->source());
  EXPECT_EQ((*info)["model_max_length"], model.max_model_len);
  EXPECT_EQ((*info)["vocab_size"], model.vocab_size);
  EXPECT_TRUE((*info)["pad_token"].is_null());
}

}  // namespace
}  // namespace pagoda::api
