#include "engine/request_constraint.h"

#include <gtest/gtest.h>

#include "structured_test_support.h"

namespace pagoda::engine {
namespace {

using Outcome = RequestConstraint::Outcome;
using structured::testing::byte_compiler;

std::shared_ptr<const structured::CompiledConstraint> digits() {
  static auto compiler = byte_compiler();
  auto compiled = compiler->compile({.kind = structured::ConstraintKind::kRegex, .text = "[0-9]+"});
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return *compiled;
}

Outcome feed(RequestConstraint& c, std::string_view text) {
  Outcome last = Outcome::kContinue;
  for (const char ch : text) last = c.accept(static_cast<unsigned char>(ch));
  return last;
}

TEST(RequestConstraintTest, WithoutReasoningTheFirstTokenIsConstrained) {
  RequestConstraint c(digits(), {kEos}, std::nullopt);
  EXPECT_TRUE(c.active());
  EXPECT_EQ(c.accept('x'), Outcome::kRefused);
  EXPECT_EQ(feed(c, "42"), Outcome::kContinue);
  EXPECT_EQ(c.accept(kEos), Outcome::kComplete);
  EXPECT_FALSE(c.active());
}

TEST(RequestConstraintTest, TheThinkingSpanIsFreeAndTheConstraintStartsAfterItsEndTag) {
  RequestConstraint c(digits(), {kEos}, std::string("</think>"));
  EXPECT_FALSE(c.active());
  // Free text, a false start of the tag, then the tag cut across tokens.
  EXPECT_EQ(feed(c, "letters and </thin k> then </th"), Outcome::kContinue);
  EXPECT_FALSE(c.active());
  EXPECT_EQ(feed(c, "ink>"), Outcome::kContinue);
  EXPECT_TRUE(c.active());
  EXPECT_EQ(c.accept('a'), Outcome::kRefused);
  EXPECT_EQ(feed(c, "7"), Outcome::kContinue);
  EXPECT_EQ(c.accept(kEos), Outcome::kComplete);
}

TEST(RequestConstraintTest, TextAfterTheEndTagInTheSameTokenCounts) {
  // The byte tokenizer's added token "Hello world." closes a span tagged "Hello" and brings
  // " world." with it: the space is dropped, "world." goes to the matcher.
  static auto compiler = byte_compiler();
  auto choice = compiler->compile(
      {.kind = structured::ConstraintKind::kChoice, .choices = {"world.!", "other"}});
  ASSERT_TRUE(choice.ok()) << choice.status().to_string();
  RequestConstraint fits(*choice, {kEos}, std::string("Hello"));
  EXPECT_EQ(fits.accept(kHelloWorld), Outcome::kContinue);
  EXPECT_TRUE(fits.active());
  EXPECT_EQ(fits.accept('!'), Outcome::kContinue);
  EXPECT_EQ(fits.accept(kEos), Outcome::kComplete);

  RequestConstraint refused(digits(), {kEos}, std::string("Hello"));
  EXPECT_EQ(refused.accept(kHelloWorld), Outcome::kRefused);
}

}  // namespace
}  // namespace pagoda::engine
