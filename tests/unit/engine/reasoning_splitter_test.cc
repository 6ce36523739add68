// The thinking-span splitter: tags found whole or cut anywhere across deltas, text before and
// after the span, a span the prompt opened, and held-back partial tags released at the end.
#include "engine/reasoning_splitter.h"

#include <gtest/gtest.h>

#include <random>

namespace pagoda::engine {
namespace {

const ReasoningTags kThink{"<think>", "</think>"};

struct Joined {
  std::string reasoning;
  std::string content;
  int opened = 0;
  int closed = 0;
};

// Feeds `text` cut at `cuts` (sorted offsets), then finishes.
Joined feed_in_pieces(const std::string& text, const std::vector<std::size_t>& cuts,
                      bool starts_inside) {
  ReasoningSplitter splitter(kThink, starts_inside);
  Joined j;
  std::size_t from = 0;
  auto take = [&](const ReasoningSplitter::Split& s) {
    j.reasoning += s.reasoning;
    j.content += s.content;
    j.opened += s.opened;
    j.closed += s.closed;
  };
  for (std::size_t cut : cuts) {
    take(splitter.feed(text.substr(from, cut - from)));
    from = cut;
  }
  take(splitter.feed(text.substr(from)));
  take(splitter.finish());
  return j;
}

TEST(ReasoningSplitterTest, SplitsOneSpan) {
  const Joined j = feed_in_pieces("Hi <think>plan a, b</think>The answer is 4.", {}, false);
  EXPECT_EQ(j.content, "Hi The answer is 4.");
  EXPECT_EQ(j.reasoning, "plan a, b");
  EXPECT_EQ(j.opened, 1);
  EXPECT_EQ(j.closed, 1);
}

TEST(ReasoningSplitterTest, PromptOpenedSpanStartsInside) {
  const Joined j = feed_in_pieces("step 1\nstep 2</think>\n\nDone", {}, true);
  EXPECT_EQ(j.reasoning, "step 1\nstep 2");
  EXPECT_EQ(j.content, "\n\nDone");
  EXPECT_EQ(j.opened, 0);
  EXPECT_EQ(j.closed, 1);
}

TEST(ReasoningSplitterTest, OnlyOneSpanAndLaterTagsAreContent) {
  const Joined j = feed_in_pieces("<think>a</think>b<think>c</think>", {}, false);
  EXPECT_EQ(j.reasoning, "a");
  EXPECT_EQ(j.content, "b<think>c</think>");
}

TEST(ReasoningSplitterTest, PartialTagAtTheEndGoesToItsSide) {
  EXPECT_EQ(feed_in_pieces("thinking </thi", {}, true).reasoning, "thinking </thi");
  EXPECT_EQ(feed_in_pieces("a <th", {}, false).content, "a <th");
  // A "<" that turns out not to start a tag is released with what follows.
  const Joined j = feed_in_pieces("x <b> y", {3}, false);
  EXPECT_EQ(j.content, "x <b> y");
}

TEST(ReasoningSplitterTest, HoldsBackOnlyWhatCouldStillBeATag) {
  ReasoningSplitter splitter(kThink, false);
  EXPECT_EQ(splitter.feed("answer <thi").content, "answer ");
  const ReasoningSplitter::Split s = splitter.feed("nk>why");
  EXPECT_TRUE(s.opened);
  EXPECT_EQ(s.reasoning, "why");
  EXPECT_TRUE(splitter.inside());
}

TEST(ReasoningSplitterTest, AnyCutsGiveTheSameSplit) {
  const std::string text = "pre <think>a <b> </thin c</think> post </think> <think>";
  for (bool inside : {false, true}) {
    const Joined whole = feed_in_pieces(text, {}, inside);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 500; ++trial) {
      std::vector<std::size_t> cuts;
      for (std::size_t i = 1; i < text.size(); ++i) {
        if (rng() % 4 == 0) cuts.push_back(i);
      }
      const Joined pieces = feed_in_pieces(text, cuts, inside);
      ASSERT_EQ(pieces.reasoning, whole.reasoning) << trial;
      ASSERT_EQ(pieces.content, whole.content) << trial;
      ASSERT_EQ(pieces.closed, whole.closed) << trial;
    }
  }
  EXPECT_EQ(feed_in_pieces(text, {}, false).reasoning, "a <b> </thin c");
}

TEST(ReasoningSplitterTest, EndsInsideSpan) {
  EXPECT_TRUE(ends_inside_span("<|im_start|>assistant\n<think>\n", kThink));
  EXPECT_FALSE(ends_inside_span("<think>x</think>\n", kThink));
  EXPECT_TRUE(ends_inside_span("<think>x</think> again <think>", kThink));
  EXPECT_FALSE(ends_inside_span("no tags", kThink));
}

}  // namespace
}  // namespace pagoda::engine
