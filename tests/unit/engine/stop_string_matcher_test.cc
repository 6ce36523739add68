// StopStringMatcher: holdback, earliest-ending match, include_stop_str_in_output, min_tokens
// (detect=false), UTF-8, validation; and a property test that the result never depends on how
// the text is split into feeds.
#include "engine/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace pagoda::engine {
namespace {

// Feeds `pieces` in order and returns all released text (flushed at the end when nothing matched)
// and the index of the stop string that matched.
std::pair<std::string, std::optional<std::size_t>> run(StopStringMatcher& m,
                                                       const std::vector<std::string>& pieces) {
  std::string text;
  for (const std::string& piece : pieces) {
    StopStringMatcher::Result r = m.feed(piece);
    text += r.released;
    if (r.matched) return {text, r.matched};
  }
  return {text + m.flush(), std::nullopt};
}

TEST(StopStringMatcherTest, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher m({}, false);
  EXPECT_EQ(m.feed("hello").released, "hello");
  EXPECT_EQ(m.feed(" world").released, " world");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcherTest, HoldsBackACandidateUntilItCannotMatch) {
  StopStringMatcher m({"</s>"}, false);
  EXPECT_EQ(m.feed("Hi <").released, "Hi ");
  EXPECT_EQ(m.feed("/").released, "");
  EXPECT_EQ(m.feed("p>").released, "</p>");
  const StopStringMatcher::Result r = m.feed("x</s>!");
  EXPECT_EQ(r.released, "x");
  EXPECT_EQ(r.matched, 0U);
  EXPECT_TRUE(m.matched());
}

TEST(StopStringMatcherTest, StopStringSpanningManyFeeds) {
  StopStringMatcher m({"abc"}, false);
  EXPECT_EQ(run(m, {"xa", "b", "c", "tail"}),
            std::make_pair(std::string("x"), std::optional<std::size_t>(0)));
}

TEST(StopStringMatcherTest, HoldsTheLongestTailThatIsAStopPrefix) {
  // "aaa": the tail "aa" may still become "aab"; the first "a" cannot.
  StopStringMatcher m({"aab"}, false);
  EXPECT_EQ(m.feed("aaa").released, "a");
  const StopStringMatcher::Result r = m.feed("b");
  EXPECT_EQ(r.released, "");
  EXPECT_EQ(r.matched, 0U);
}

TEST(StopStringMatcherTest, MatchInsideTheFirstFeed) {
  StopStringMatcher m({"world"}, false);
  const StopStringMatcher::Result r = m.feed("hello world and more");
  EXPECT_EQ(r.released, "hello ");
  EXPECT_EQ(r.matched, 0U);
}

TEST(StopStringMatcherTest, IncludeStopStringKeepsItAndHoldsNothing) {
  StopStringMatcher m({"END"}, true);
  EXPECT_EQ(m.feed("foo E").released, "foo E");
  const StopStringMatcher::Result r = m.feed("ND bar");
  EXPECT_EQ(r.released, "ND");
  EXPECT_EQ(r.matched, 0U);
}

TEST(StopStringMatcherTest, EarliestEndingMatchWinsThenTheLongest) {
  {
    // "ab" is complete one byte before "abc": generation would have stopped there.
    StopStringMatcher m({"abc", "ab"}, false);
    EXPECT_EQ(run(m, {"xabc"}), std::make_pair(std::string("x"), std::optional<std::size_t>(1)));
  }
  {
    StopStringMatcher m({"abcde", "bcd"}, false);
    EXPECT_EQ(run(m, {"abcdef"}), std::make_pair(std::string("a"), std::optional<std::size_t>(1)));
  }
  {
    // Both end at the same byte: the longer one cuts more, so nothing of it leaks.
    StopStringMatcher m({"bc", "abc"}, false);
    EXPECT_EQ(run(m, {"xab", "c"}),
              std::make_pair(std::string("x"), std::optional<std::size_t>(1)));
  }
}

TEST(StopStringMatcherTest, DuplicatesReportTheFirstIndex) {
  StopStringMatcher m({"zz", "stop", "stop"}, false);
  EXPECT_EQ(run(m, {"a stop"}).second, 1U);
}

TEST(StopStringMatcherTest, NoDetectionBeforeMinTokensButMatchesMayStartThere) {
  {
    StopStringMatcher m({"e"}, false);
    EXPECT_EQ(m.feed("hello", /*detect=*/false).released, "hello");
    const StopStringMatcher::Result r = m.feed("me");
    EXPECT_EQ(r.released, "m");
    EXPECT_EQ(r.matched, 0U);
  }
  {
    // vLLM looks back len(stop) - 1 characters before the new text: a match may straddle.
    StopStringMatcher m({"ab"}, false);
    EXPECT_EQ(m.feed("xa", /*detect=*/false).released, "x");
    const StopStringMatcher::Result r = m.feed("b");
    EXPECT_EQ(r.released, "");
    EXPECT_EQ(r.matched, 0U);
  }
}

TEST(StopStringMatcherTest, MultiByteCharactersAreNeverSplit) {
  {
    StopStringMatcher m({"é"}, false);
    EXPECT_EQ(run(m, {"caf", "é!"}),
              std::make_pair(std::string("caf"), std::optional<std::size_t>(0)));
  }
  {
    // "è" and "é" share their first byte: the held byte is released as the whole "é".
    StopStringMatcher m({"è"}, false);
    EXPECT_EQ(m.feed("é").released, "é");
  }
  {
    StopStringMatcher m({"日本"}, false);
    EXPECT_EQ(m.feed("今日").released, "今");
    EXPECT_EQ(m.feed("曜").released, "日曜");
    const StopStringMatcher::Result r = m.feed("日本語");
    EXPECT_EQ(r.released, "");
    EXPECT_EQ(r.matched, 0U);
  }
}

TEST(StopStringMatcherTest, FlushReleasesTheHeldTail) {
  StopStringMatcher m({"xyz"}, false);
  EXPECT_EQ(m.feed("abc xy").released, "abc ");
  EXPECT_EQ(m.flush(), "xy");
}

TEST(StopStringMatcherTest, ValidateRejectsBadStopStrings) {
  EXPECT_TRUE(StopStringMatcher::validate(std::vector<std::string>{"a", "</s>"}).ok());
  const Status empty = StopStringMatcher::validate(std::vector<std::string>{"a", ""});
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("stop[1]"), std::string::npos) << empty.message();
  const Status long_one = StopStringMatcher::validate(
      std::vector<std::string>{std::string(StopStringMatcher::kMaxStopStringBytes + 1, 'x')});
  EXPECT_EQ(long_one.code(), StatusCode::kInvalidArgument);
  const Status many = StopStringMatcher::validate(
      std::vector<std::string>(StopStringMatcher::kMaxStopStrings + 1, "x"));
  EXPECT_EQ(many.code(), StatusCode::kInvalidArgument);
  const Status bad_utf8 = StopStringMatcher::validate(std::vector<std::string>{"\xC3"});
  EXPECT_EQ(bad_utf8.code(), StatusCode::kInvalidArgument);
}

// What a stop-string search over the whole text gives: the match that ends first, the longest
// of those; released text cut before it (after it when included).
std::pair<std::string, std::optional<std::size_t>> reference(const std::string& text,
                                                             const std::vector<std::string>& stops,
                                                             bool include) {
  for (std::size_t end = 1; end <= text.size(); ++end) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (!best || s.size() > stops[*best].size()) best = i;
    }
    if (best) return {text.substr(0, include ? end : end - stops[*best].size()), best};
  }
  return {text, std::nullopt};
}

TEST(StopStringMatcherTest, ResultDoesNotDependOnHowTextIsSplit) {
  std::mt19937 rng(1234);
  auto random_string = [&](std::size_t min_len, std::size_t max_len) {
    std::string s(std::uniform_int_distribution<std::size_t>(min_len, max_len)(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    return s;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops(std::uniform_int_distribution<int>(1, 4)(rng));
    for (std::string& s : stops) s = random_string(1, 5);
    const std::string text = random_string(0, 30);
    const bool include = iter % 2 == 1;
    std::vector<std::string> pieces;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 4)(rng);
      pieces.push_back(text.substr(pos, n));
      pos += n;
    }
    StopStringMatcher m(stops, include);
    // Nothing released may later turn out to be part of a match.
    EXPECT_EQ(run(m, pieces), reference(text, stops, include))
        << "text " << text << " stops " << stops[0] << (stops.size() > 1 ? " ..." : "");
  }
}

}  // namespace
}  // namespace pagoda::engine
