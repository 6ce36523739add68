// --speculative-config: vLLM's keys parse; malformed JSON, unknown methods and keys, wrong
// types and out-of-range values are refused with a message naming the problem.
#include "spec/speculative_config.h"

#include <gtest/gtest.h>

namespace pagoda::spec {
namespace {

TEST(SpeculativeConfigTest, ParsesNgram) {
  auto c = parse_speculative_config(
      R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":2,"prompt_lookup_max":5})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->method, SpeculativeMethod::kNgram);
  EXPECT_EQ(c->num_speculative_tokens, 3);
  EXPECT_EQ(c->prompt_lookup_min, 2);
  EXPECT_EQ(c->prompt_lookup_max, 5);
}

TEST(SpeculativeConfigTest, ParsesDraftModelAndPolicyKnobs) {
  auto c = parse_speculative_config(
      R"({"method":"draft_model","model":"d.gguf","num_speculative_tokens":5,
          "disable_by_batch_size":4,"min_acceptance_rate":0.5,"reprobe_interval":8})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->method, SpeculativeMethod::kDraftModel);
  EXPECT_EQ(c->model, "d.gguf");
  EXPECT_EQ(c->disable_by_batch_size, 4);
  EXPECT_DOUBLE_EQ(c->min_acceptance_rate, 0.5);
  EXPECT_EQ(c->reprobe_interval, 8);
}

TEST(SpeculativeConfigTest, ALoneMinimumAboveTheDefaultMaximumRaisesIt) {
  auto c = parse_speculative_config(R"({"method":"ngram","prompt_lookup_min":6})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->prompt_lookup_max, 6);
}

void expect_refused(const char* json, const char* fragment) {
  auto c = parse_speculative_config(json);
  ASSERT_FALSE(c.ok()) << json;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("--speculative-config"), std::string::npos);
}

TEST(SpeculativeConfigTest, BadInputIsRefusedClearly) {
  expect_refused("{method: ngram}", "not valid JSON");
  expect_refused("[1]", "JSON object");
  expect_refused(R"({"num_speculative_tokens":4})", "\"method\" is required");
  expect_refused(R"({"method":"eagle"})", "unknown method \"eagle\"");
  expect_refused(R"({"method":"ngram","k":4})", "unknown key \"k\"");
  expect_refused(R"({"method":"ngram","num_speculative_tokens":"4"})", "must be an integer");
  expect_refused(R"({"method":"ngram","num_speculative_tokens":0})", "[1, 16]");
  expect_refused(R"({"method":"ngram","num_speculative_tokens":17})", "[1, 16]");
  expect_refused(R"({"method":"ngram","prompt_lookup_min":0})", "at least 1");
  expect_refused(R"({"method":"ngram","prompt_lookup_min":3,"prompt_lookup_max":2})",
                 "prompt_lookup_max");
  expect_refused(R"({"method":"ngram","model":"x.gguf"})", "only for method");
  expect_refused(R"({"method":"draft_model"})", "needs \"model\"");
  expect_refused(R"({"method":"ngram","min_acceptance_rate":1.5})", "[0, 1]");
  expect_refused(R"({"method":"ngram","disable_by_batch_size":0})", "at least 1");
}

}  // namespace
}  // namespace pagoda::spec
