// Hostile and broken templates: every failure is a Status naming the problem, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "template/chat_template.h"
#include "template/jinja/template.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;

Status render_status(const std::string& source, const RenderOptions& options = {}) {
  auto compiled = Template::compile(source);
  if (!compiled.ok()) return compiled.status();
  auto rendered = compiled->render({}, options);
  return rendered.ok() ? Status::ok_status() : rendered.status();
}

TEST(JinjaErrorsTest, SyntaxErrorNamesTheLine) {
  Status s = render_status("line one\nline two\n{{ 1 + }}\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("template line 3"));
}

TEST(JinjaErrorsTest, UnclosedBlockNamesTheTagsItWanted) {
  Status s = render_status("{% for x in y %}\n{% if x %}\n");
  EXPECT_THAT(s.message(), HasSubstr("'endif'"));
}

TEST(JinjaErrorsTest, UnknownFilterFailsEvenInAnUntakenBranch) {
  Status s = render_status("{% if false %}{{ x | frobnicate }}{% endif %}");
  EXPECT_THAT(s.message(), HasSubstr("No filter named 'frobnicate'"));
}

TEST(JinjaErrorsTest, RaiseExceptionCarriesTheTemplateMessageAndLine) {
  Status s = render_status("ok\n{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_THAT(s.message(), HasSubstr("Conversation roles must alternate"));
  EXPECT_THAT(s.message(), HasSubstr("template line 2"));
}

TEST(JinjaErrorsTest, RuntimeErrorNamesTheLine) {
  Status s = render_status("a\nb\n{{ 'x' + 1 }}");
  EXPECT_THAT(s.message(), HasSubstr("can only concatenate str"));
  EXPECT_THAT(s.message(), HasSubstr("template line 3"));
}

TEST(JinjaErrorsTest, LoopIterationLimit) {
  RenderOptions options;
  options.limits.max_loop_iterations = 1000;
  Status s = render_status(
      "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", options);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("iterations"));
}

TEST(JinjaErrorsTest, RangeIsBounded) {
  Status s = render_status("{% for i in range(1000000000) %}{% endfor %}");
  EXPECT_THAT(s.message(), HasSubstr("Range too big"));
}

TEST(JinjaErrorsTest, InfiniteMacroRecursionHitsTheDepthLimit) {
  Status s = render_status("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("deeper than the limit"));
}

TEST(JinjaErrorsTest, OutputSizeLimit) {
  RenderOptions options;
  options.limits.max_output_bytes = 1000;
  EXPECT_EQ(render_status("{% for i in range(2000) %}x{% endfor %}", options).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(render_status("{{ 'x' * 100000 }}", options).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(render_status("{% set ns = namespace(s='xx') %}{% for i in range(20) %}"
                          "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                          options)
                .code(),
            StatusCode::kOutOfRange);
}

TEST(JinjaErrorsTest, DeeplyNestedInputDoesNotOverflowTheStack) {
  for (const char* open : {"(", "[", "{'a':", "not ", "-", "x|", "x.", "1+", "x if y else "}) {
    std::string source = "{{ ";
    for (int i = 0; i < 100000; ++i) source += open;
    source += "1 }}";
    Status s = render_status(source);
    EXPECT_FALSE(s.ok()) << open;
  }
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  EXPECT_THAT(render_status(blocks).message(), HasSubstr("nesting is deeper"));
  std::string elifs = "{% if false %}";
  for (int i = 0; i < 100000; ++i) elifs += "{% elif false %}";
  EXPECT_FALSE(render_status(elifs + "{% endif %}").ok());
}

TEST(JinjaErrorsTest, SandboxRefusesMutation) {
  EXPECT_THAT(render_status("{% set l = [] %}{{ l.append(1) }}").message(), HasSubstr("unsafe"));
  EXPECT_THAT(render_status("{% set d = {} %}{{ d.update({'a': 1}) }}").message(),
              HasSubstr("unsafe"));
}

TEST(JinjaErrorsTest, NoWayOutOfTheSandbox) {
  for (const char* source :
       {"{% include 'x' %}", "{% import 'x' as y %}", "{% extends 'x' %}", "{{ ''.__class__ }}",
        "{{ cycler.__init__.__globals__ }}", "{{ self }}{{ config }}{{ os.environ }}"}) {
    auto compiled = Template::compile(source);
    if (!compiled.ok()) continue;
    auto rendered = compiled->render({});
    EXPECT_TRUE(!rendered.ok() || rendered->empty()) << source << " rendered " << *rendered;
  }
}

TEST(JinjaErrorsTest, UnterminatedConstructs) {
  for (const char* source : {"{{ x", "{% if", "{# never closed", "{{ 'abc }}", "{% raw %}abc",
                             "{{ x[ }}", "{{ f(1, }}", "{% for %}", "{% set %}", "{% macro %}",
                             "{{ ) }}", "{{ 99999999999999999999999 }}", "{{ '\\u12' }}"}) {
    EXPECT_FALSE(render_status(source).ok()) << source;
  }
}

TEST(ChatTemplateErrorsTest, RejectsBadInputsWithStatus) {
  auto tmpl = ChatTemplate::compile("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::object();
  EXPECT_EQ(tmpl->render(inputs).status().code(), StatusCode::kInvalidArgument);
  inputs.messages = nlohmann::ordered_json::array({1, 2});
  EXPECT_EQ(tmpl->render(inputs).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_chat_template_file("/nonexistent/template.jinja").status().code(),
            StatusCode::kNotFound);
  EXPECT_THAT(ChatTemplate::compile("{% if %}").status().message(), HasSubstr("template line 1"));
}

}  // namespace
}  // namespace pagoda::jinja
