#include "engine/reasoning_splitter.h"

#include <algorithm>
#include <utility>

namespace pagoda::engine {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
std::size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(ReasoningTags tags, bool starts_inside)
    : tags_(std::move(tags)), state_(starts_inside ? State::kInside : State::kBefore) {}

ReasoningSplitter::Split ReasoningSplitter::feed(std::string_view text) {
  Split split;
  std::string buffer = std::exchange(held_, std::string()) + std::string(text);
  std::string_view rest = buffer;
  while (!rest.empty()) {
    if (state_ == State::kAfter) {
      split.content += rest;
      break;
    }
    const std::string& tag = state_ == State::kBefore ? tags_.start : tags_.end;
    std::string& side = state_ == State::kBefore ? split.content : split.reasoning;
    const std::size_t at = rest.find(tag);
    if (at != std::string_view::npos) {
      side += rest.substr(0, at);
      rest.remove_prefix(at + tag.size());
      if (state_ == State::kBefore) {
        state_ = State::kInside;
        split.opened = true;
      } else {
        state_ = State::kAfter;
        split.closed = true;
      }
      continue;
    }
    const std::size_t keep = partial_tag_suffix(rest, tag);
    side += rest.substr(0, rest.size() - keep);
    held_ = std::string(rest.substr(rest.size() - keep));
    break;
  }
  return split;
}

ReasoningSplitter::Split ReasoningSplitter::finish() {
  Split split;
  (state_ == State::kInside ? split.reasoning : split.content) = std::exchange(held_, {});
  return split;
}

bool ends_inside_span(std::string_view text, const ReasoningTags& tags) {
  const std::size_t start = text.rfind(tags.start);
  if (start == std::string_view::npos) return false;
  const std::size_t end = text.rfind(tags.end);
  return end == std::string_view::npos || end < start;
}

}  // namespace pagoda::engine
