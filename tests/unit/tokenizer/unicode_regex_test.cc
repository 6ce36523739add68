// UnicodeRegex: string patterns (tokenizer.json's {"String": ...}) match as plain text, and regex
// patterns follow Unicode classes.
#include "tokenizer/unicode_regex.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

using Matches = std::vector<std::pair<std::size_t, std::size_t>>;

TEST(UnicodeRegexTest, StringPatternsCompileAndMatchLiterally) {
  // Gemma's tokenizer.json splits on the string " "; "a.b" must not match "axb".
  auto space = UnicodeRegex::compile(" ", /*literal=*/true);
  ASSERT_TRUE(space.ok()) << space.status().to_string();
  EXPECT_EQ((*space)->find_all("a b  c"), (Matches{{1, 2}, {3, 4}, {4, 5}}));
  auto dot = UnicodeRegex::compile("a.b", /*literal=*/true);
  ASSERT_TRUE(dot.ok()) << dot.status().to_string();
  EXPECT_EQ((*dot)->find_all("axb a.b"), (Matches{{4, 7}}));
  auto wide = UnicodeRegex::compile("\xe2\x96\x81", /*literal=*/true);  // "▁"
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  EXPECT_EQ((*wide)->find_all("x\xe2\x96\x81y"), (Matches{{1, 4}}));
}

TEST(UnicodeRegexTest, RegexPatternsUseUnicodeClasses) {
  auto letters = UnicodeRegex::compile(R"(\p{L}+)");
  ASSERT_TRUE(letters.ok()) << letters.status().to_string();
  EXPECT_EQ((*letters)->find_all("ab 1 \xc3\xa9t\xc3\xa9"), (Matches{{0, 2}, {5, 10}}));
}

}  // namespace
}  // namespace pagoda
