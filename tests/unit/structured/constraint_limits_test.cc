#include "structured/constraint_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda::structured {
namespace {

std::string refusal(const ConstraintSpec& spec, ConstraintLimits limits = {}) {
  const Status status = check_constraint_limits(spec, limits);
  return status.ok() ? "" : status.message();
}

std::string nested_schema(int depth) {
  std::string schema = R"({"type": "string"})";
  for (int i = 0; i < depth; ++i) {
    schema = R"({"type": "object", "properties": {"x": )" + schema + "}}";
  }
  return schema;
}

TEST(ConstraintLimitsTest, AcceptsOrdinarySpecs) {
  EXPECT_EQ(refusal({.kind = ConstraintKind::kJsonSchema, .text = nested_schema(5)}), "");
  EXPECT_EQ(refusal({.kind = ConstraintKind::kRegex, .text = R"(\d{3}-\d{4})"}), "");
  EXPECT_EQ(refusal({.kind = ConstraintKind::kChoice, .choices = {"a", "b"}}), "");
  EXPECT_EQ(refusal({.kind = ConstraintKind::kJsonObject}), "");
  // Braces inside strings are not nesting.
  EXPECT_EQ(
      refusal({.kind = ConstraintKind::kJsonSchema,
               .text = R"({"type": "string", "pattern": ")" + std::string(200, '[') + R"("})"}),
      "");
}

TEST(ConstraintLimitsTest, RefusesWhatWouldMakeTheCompileExpensive) {
  ConstraintLimits limits;
  EXPECT_NE(refusal({.kind = ConstraintKind::kJsonSchema, .text = nested_schema(40)}, limits)
                .find("nests deeper than 32"),
            std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kJsonSchema,
                     .text = R"({"type": "string", "maxLength": 100000})"})
                .find("\"maxLength\" is 100000"),
            std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kJsonSchema,
                     .text = R"({"type": "array", "items": {"type": "string",
                                 "pattern": "a{5000}"}})"})
                .find("repetition"),
            std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kRegex, .text = "(a{1000}){1000}"})
                .find("nested counted repetitions"),
            std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kRegex, .text = "x{2000,}"}).find("2000"),
            std::string::npos);
  std::string big_enum = R"({"enum": [)";
  for (int i = 0; i < 5000; ++i) big_enum += (i ? "," : "") + std::to_string(i);
  EXPECT_NE(
      refusal({.kind = ConstraintKind::kJsonSchema, .text = big_enum + "]}"}).find("enum values"),
      std::string::npos);
  limits.max_spec_bytes = 10;
  EXPECT_NE(refusal({.kind = ConstraintKind::kGrammar, .text = "root ::= \"abcdefgh\""}, limits)
                .find("size in bytes"),
            std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kRegex, .text = ""}).find("empty"), std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kChoice}).find("empty"), std::string::npos);
  EXPECT_NE(refusal({.kind = ConstraintKind::kJsonSchema, .text = "42"}).find("object"),
            std::string::npos);
}

TEST(ConstraintLimitsTest, EscapedBracesAreNotRepetitions) {
  EXPECT_EQ(refusal({.kind = ConstraintKind::kRegex, .text = R"(\{5000\})"}), "");
}

}  // namespace
}  // namespace pagoda::structured
