// Gemma 3's chat at the API: its template (tests/data/template/templates/google-gemma-3-it.jinja)
// folds a system message into the first user turn and refuses roles out of order with
// raise_exception, which must reach the client as a 400 in its own words; with the real Gemma
// tokenizer the template's "<bos>" is the prompt's only BOS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "api/chat_prompt.h"
#include "api/chat_request.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

using testing::json;

const std::string kGemmaTemplate =
    std::string(PAGODA_TEST_DATA_DIR) + "/template/templates/google-gemma-3-it.jinja";
const std::string kGemmaPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf";

ServedModel with_gemma_template(ServedModel model) {
  auto compiled = load_chat_template_file(kGemmaTemplate);
  PAGODA_CHECK(compiled.ok()) << compiled.status().to_string();
  model.chat_template = std::move(*compiled);
  return model;
}

TEST(GemmaChatTest, RolesOutOfOrderAreABadRequestInTheTemplatesWords) {
  const ServedModel model = with_gemma_template(testing::byte_model());
  for (const char* body : {
           R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})",
           R"({"messages": [{"role": "system", "content": "s"},
                            {"role": "assistant", "content": "a"}]})",
       }) {
    auto job = parse_chat_request(json(body), model);
    ASSERT_FALSE(job.ok()) << body;
    EXPECT_EQ(job.error().http_status, 400);
    EXPECT_EQ(job.error().param, "messages");
    EXPECT_NE(job.error().message.find(
                  "Conversation roles must alternate user/assistant/user/assistant/..."),
              std::string::npos)
        << job.error().message;
  }
}

TEST(GemmaChatTest, SystemFoldsIntoTheFirstUserTurnWithOneBos) {
  if (!std::filesystem::exists(kGemmaPath)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string_view(ci) == "true") {
      FAIL() << kGemmaPath << " is missing although CI=true; scripts/setup.sh fetches it";
    }
    GTEST_SKIP() << kGemmaPath << " is missing; run scripts/setup.sh";
  }
  auto files = open_model_files(kGemmaPath);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  auto tokenizer = load_tokenizer_from_gguf(*files->gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  auto served = make_served_model({"gemma-3-270m"}, kGemmaPath,
                                  std::shared_ptr<const Tokenizer>(std::move(*tokenizer)),
                                  std::nullopt, 2048);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  const ServedModel model = with_gemma_template(std::move(*served));

  const Json body = json(R"({"messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Name a colour."}]})");
  auto text = render_chat_prompt(body, model);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "<bos><start_of_turn>user\nBe brief.\n\nName a colour.<end_of_turn>\n"
            "<start_of_turn>model\n");
  auto job = parse_chat_request(body, model);
  ASSERT_TRUE(job.ok()) << job.error().message;
  const std::vector<std::int32_t>& ids = job->requests[0].prompt_token_ids;
  ASSERT_GE(ids.size(), 3u);
  // <bos> is id 2 and <start_of_turn> 105 in the GGUF's token table; the chat adds no second BOS.
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 105);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  EXPECT_EQ(model.tokenizer->decode(ids), *text);
}

}  // namespace
}  // namespace pagoda::api
