// Each Jinja construct against the output Python jinja2 gave for it (language_golden.json).
#include <gtest/gtest.h>

#include "golden_data.h"
#include "template/jinja/json.h"
#include "template/jinja/template.h"

namespace pagoda::jinja {
namespace {

struct LanguageCase {
  std::string name;
  nlohmann::ordered_json data;
};

std::vector<LanguageCase> language_cases() {
  std::vector<LanguageCase> cases;
  const nlohmann::ordered_json golden = testing::load_template_json("language_golden.json");
  for (const auto& c : golden["cases"]) {
    cases.push_back({c["name"].get<std::string>(), c});
  }
  return cases;
}

class LanguageTest : public ::testing::TestWithParam<LanguageCase> {};

TEST_P(LanguageTest, MatchesJinja2) {
  const auto& data = GetParam().data;
  std::vector<std::pair<std::string, Value>> variables;
  for (const auto& [key, value] : data["context"].items()) {
    variables.emplace_back(key, value_from_json(value));
  }
  RenderOptions options;
  options.now = testing::golden_now();
  auto compiled = Template::compile(data["template"].get<std::string>());
  StatusOr<std::string> rendered = compiled.ok() ? compiled->render(variables, options)
                                                 : StatusOr<std::string>(compiled.status());
  if (data.contains("error")) {
    EXPECT_FALSE(rendered.ok()) << "jinja2 failed with: " << data["error"].get<std::string>()
                                << "\nbut we rendered: " << *rendered;
  } else {
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, data["output"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, LanguageTest, ::testing::ValuesIn(language_cases()),
                         [](const auto& info) { return testing::test_name(info.param.name); });

}  // namespace
}  // namespace pagoda::jinja
