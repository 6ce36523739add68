// response_format, structured_outputs and guided_* through the chat and completion parsers:
// what compiles onto the engine request, and the 400s that name the parameter.
#include <gtest/gtest.h>

#include "../api/api_test_models.h"
#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/structured_output.h"
#include "structured_test_support.h"

namespace pagoda::api {
namespace {

ServedModel model_with_compiler() {
  ServedModel model = testing::byte_model();
  model.constraints = structured::testing::byte_compiler();
  return model;
}

// Compiles the job's constraint as a frontend does once the parser is through.
ApiErrorOr<GenerationJob> compiled(ApiErrorOr<GenerationJob> job, const ServedModel& model) {
  if (!job.ok()) return job;
  if (std::optional<ApiError> error = compile_job_constraint(*job, model)) return *error;
  return job;
}

ApiErrorOr<GenerationJob> chat(const std::string& extra, const ServedModel& model) {
  const Json body = Json::parse(R"({"model": "test-model", "max_tokens": 4,
      "messages": [{"role": "user", "content": "hi"}], )" +
                                extra + "}");
  return compiled(parse_chat_request(body, model, {}), model);
}

ApiErrorOr<GenerationJob> completion(const std::string& extra, const ServedModel& model) {
  const Json body =
      Json::parse(R"({"model": "test-model", "max_tokens": 4, "prompt": "hi", )" + extra + "}");
  return compiled(parse_completion_request(body, model, {}), model);
}

// The kind compiled onto the job's request; nullopt (and a failure) when there is none.
std::optional<structured::ConstraintKind> kind_of(const ApiErrorOr<GenerationJob>& job) {
  if (!job.ok()) {
    ADD_FAILURE() << job.error().message;
    return std::nullopt;
  }
  if (job->requests[0].constraint == nullptr) {
    ADD_FAILURE() << "no constraint";
    return std::nullopt;
  }
  return job->requests[0].constraint->kind();
}

TEST(StructuredOutputApiTest, EverySpellingCompilesOntoTheRequest) {
  const ServedModel model = model_with_compiler();
  using K = structured::ConstraintKind;
  EXPECT_EQ(kind_of(chat(R"("response_format": {"type": "json_object"})", model)), K::kJsonObject);
  EXPECT_EQ(kind_of(chat(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "strict": true, "schema": {"type": "object"}}})",
                         model)),
            K::kJsonSchema);
  EXPECT_EQ(kind_of(chat(R"("structured_outputs": {"regex": "[0-9]+"})", model)), K::kRegex);
  EXPECT_EQ(kind_of(chat(R"("structured_outputs": {"json_object": true})", model)), K::kJsonObject);
  EXPECT_EQ(kind_of(completion(R"("structured_outputs": {"choice": ["a", "b"]})", model)),
            K::kChoice);
  EXPECT_EQ(kind_of(completion(R"("guided_json": "{\"type\": \"integer\"}")", model)),
            K::kJsonSchema);
  EXPECT_EQ(kind_of(completion(R"("guided_json": {"type": "integer"})", model)), K::kJsonSchema);
  EXPECT_EQ(kind_of(completion(R"("guided_regex": "a+")", model)), K::kRegex);
  EXPECT_EQ(kind_of(completion(R"("guided_choice": ["x"])", model)), K::kChoice);
  EXPECT_EQ(kind_of(completion(R"("guided_grammar": "root ::= \"a\"")", model)), K::kGrammar);
  EXPECT_EQ(kind_of(completion(R"("response_format": {"type": "json_object"})", model)),
            K::kJsonObject);
  // "text" and no field at all: unconstrained, nothing compiled.
  auto text = chat(R"("response_format": {"type": "text"})", model);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->requests[0].constraint, nullptr);
  // The second and third json_object are cache hits.
  EXPECT_EQ(model.constraints->stats().cache_hits, 2);
}

TEST(StructuredOutputApiTest, BadInputIsA400NamingTheParameter) {
  const ServedModel model = model_with_compiler();
  struct Case {
    const char* extra;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"("response_format": {"type": "xml"})", "response_format.type", "\"xml\""},
      {R"("response_format": {"type": "json_schema"})", "response_format.json_schema",
       "json_schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})",
       "response_format.json_schema.name", "name"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}})",
       "response_format.json_schema.schema", "invalid json_schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": 5}})",
       "response_format.json_schema.schema", "number"},
      {R"("guided_regex": "(unclosed")", "guided_regex", "invalid regex"},
      {R"("guided_choice": "yes")", "guided_choice", "array"},
      {R"("guided_choice": [1, 2])", "guided_choice", "list of strings"},
      {R"("guided_choice": [])", "guided_choice", "at least one"},
      {R"("guided_grammar": "root ::= missing")", "guided_grammar", "invalid grammar"},
      {R"("structured_outputs": {"structural_tag": "{}"})", "structured_outputs.structural_tag",
       "not supported"},
      {R"("guided_regex": "a", "guided_json": {"type": "object"})", "guided_regex",
       "not both 'guided_json' and 'guided_regex'"},
      {R"("response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"})",
       "structured_outputs.regex", "not both"},
      {R"("guided_regex": "a", "ignore_eos": true)", "ignore_eos", "stop_token_ids"},
      {R"("guided_json": {"type": "string", "maxLength": 1000000})", "guided_json", "maxLength"},
  };
  for (const Case& c : cases) {
    for (const bool is_chat : {true, false}) {
      auto job = is_chat ? chat(c.extra, model) : completion(c.extra, model);
      ASSERT_FALSE(job.ok()) << c.extra;
      EXPECT_EQ(job.error().http_status, 400) << c.extra;
      EXPECT_EQ(job.error().param.value_or(""), c.param) << c.extra;
      EXPECT_NE(job.error().message.find(c.message), std::string::npos)
          << c.extra << ": " << job.error().message;
    }
  }
}

TEST(StructuredOutputApiTest, AServerWithoutACompilerRefusesConstraints) {
  const ServedModel model = testing::byte_model();
  auto job = chat(R"("response_format": {"type": "json_object"})", model);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().http_status, 400);
  EXPECT_NE(job.error().message.find("not available"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::api
