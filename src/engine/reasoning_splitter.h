// Splits a request's released text into reasoning (inside the thinking span) and content, as it
// streams. A tag may arrive cut across deltas, so a suffix that could still become a tag is held
// back until the next text decides it (as stop strings are).
//
//   before --start tag--> inside --end tag--> after     (one span per output; the tags
//   (content)             (reasoning)         (content)  themselves belong to neither side)
//
// A prompt that ends inside an open span (the chat template wrote "<think>\n") starts inside.
#pragma once

#include <string>
#include <string_view>

#include "engine/reasoning_tags.h"

namespace pagoda::engine {

class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningTags tags, bool starts_inside);

  /// What a piece of text contributed to each side, and whether the span opened or closed in it.
  struct Split {
    std::string reasoning;
    std::string content;
    bool opened = false;
    bool closed = false;
  };

  /// Splits the next piece of released text.
  Split feed(std::string_view text);
  /// Releases a held-back partial tag to the side it was on (the text has ended).
  Split finish();
  /// Whether the span is open now.
  bool inside() const { return state_ == State::kInside; }

 private:
  enum class State { kBefore, kInside, kAfter };

  ReasoningTags tags_;
  State state_;
  std::string held_;
};

/// Whether `text` ends inside an open span: its last `start` comes after its last `end`.
bool ends_inside_span(std::string_view text, const ReasoningTags& tags);

}  // namespace pagoda::engine
