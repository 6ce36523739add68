// Real chat templates over real conversations, byte for byte against transformers' rendering
// (chat_golden.json, made by tests/golden/template/make_golden.py).
#include <gtest/gtest.h>

#include <map>

#include "golden_data.h"
#include "template/chat_template.h"

namespace pagoda {
namespace {

struct ChatCase {
  std::string name;
  nlohmann::ordered_json data;
};

std::vector<ChatCase> chat_cases() {
  std::vector<ChatCase> cases;
  const nlohmann::ordered_json golden = testing::load_template_json("chat_golden.json");
  for (const auto& c : golden["cases"]) {
    std::string stem = c["template"].get<std::string>();
    stem = stem.substr(0, stem.size() - std::string(".jinja").size());
    cases.push_back({stem + "__" + c["conversation"].get<std::string>(), c});
  }
  return cases;
}

const nlohmann::ordered_json& conversation(const std::string& name) {
  static const nlohmann::ordered_json all = testing::load_template_json("conversations.json");
  for (const auto& c : all) {
    if (c["name"] == name) return c;
  }
  static const nlohmann::ordered_json none;
  return none;
}

const ChatTemplate& chat_template(const std::string& file) {
  static std::map<std::string, ChatTemplate> cache;
  auto it = cache.find(file);
  if (it == cache.end()) {
    auto loaded =
        load_chat_template_file(std::string(PAGODA_TEST_DATA_DIR) + "/template/templates/" + file);
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    it = cache.emplace(file, std::move(loaded).value()).first;
  }
  return it->second;
}

class ChatGoldenTest : public ::testing::TestWithParam<ChatCase> {};

TEST_P(ChatGoldenTest, MatchesTransformers) {
  const auto& data = GetParam().data;
  const auto& conv = conversation(data["conversation"].get<std::string>());
  ASSERT_FALSE(conv.is_null());
  ChatTemplateInputs inputs;
  inputs.messages = conv["messages"];
  if (conv.contains("tools")) inputs.tools = conv["tools"];
  inputs.add_generation_prompt = conv["add_generation_prompt"].get<bool>();
  if (conv.contains("kwargs")) inputs.extra_kwargs = conv["kwargs"];
  inputs.bos_token = data["bos_token"].get<std::string>();
  inputs.eos_token = data["eos_token"].get<std::string>();
  inputs.now = testing::golden_now();
  auto rendered = chat_template(data["template"].get<std::string>()).render(inputs);
  if (data.contains("error")) {
    ASSERT_FALSE(rendered.ok()) << "transformers failed with: " << data["error"].get<std::string>();
    std::string expected = data["error"].get<std::string>();
    if (expected.find("Error: ") == std::string::npos) {
      // A raise_exception() message: the template's own words must reach the user.
      EXPECT_NE(rendered.status().message().find(expected), std::string::npos)
          << rendered.status().message();
    }
  } else {
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, data["output"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, ChatGoldenTest, ::testing::ValuesIn(chat_cases()),
                         [](const auto& info) { return testing::test_name(info.param.name); });

}  // namespace
}  // namespace pagoda
