#include "tokenizer/pre_tokenizer.h"

#include <utility>

namespace pagoda {
namespace {

struct Piece {
  std::string text;
  bool at_text_start = false;
};

struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
  bool is_delimiter = false;
};

// The delimiter ranges of `delimiters` inside `text` plus the gaps between them, in order.
std::vector<Range> cover(std::size_t size,
                         const std::vector<std::pair<std::size_t, std::size_t>>& delimiters,
                         bool invert) {
  std::vector<Range> ranges;
  std::size_t pos = 0;
  for (const auto& [begin, end] : delimiters) {
    if (begin > pos) ranges.push_back({pos, begin, invert});
    ranges.push_back({begin, end, !invert});
    pos = end;
  }
  if (pos < size) ranges.push_back({pos, size, invert});
  return ranges;
}

// Applies a delimiter behaviour the way tokenizers' NormalizedString::split does.
std::vector<Range> apply_behavior(std::vector<Range> ranges, SplitBehavior behavior) {
  std::vector<Range> out;
  bool previous_delimiter = false;
  switch (behavior) {
    case SplitBehavior::kIsolated: return ranges;
    case SplitBehavior::kRemoved:
      for (const Range& r : ranges) {
        if (!r.is_delimiter) out.push_back(r);
      }
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Range& r : ranges) {
        if (r.is_delimiter && !previous_delimiter && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        previous_delimiter = r.is_delimiter;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->is_delimiter && !previous_delimiter && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_delimiter = it->is_delimiter;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (const Range& r : ranges) {
        if (r.is_delimiter == previous_delimiter && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        previous_delimiter = r.is_delimiter;
      }
      return out;
  }
  return ranges;
}

void split_piece(const Piece& piece, const std::vector<Range>& ranges, std::vector<Piece>& out) {
  for (const Range& r : ranges) {
    out.push_back(
        {piece.text.substr(r.begin, r.end - r.begin), piece.at_text_start && r.begin == 0});
  }
}

void split_regex(const Piece& piece, const UnicodeRegex& regex, SplitBehavior behavior, bool invert,
                 std::vector<Piece>& out) {
  split_piece(
      piece, apply_behavior(cover(piece.text.size(), regex.find_all(piece.text), invert), behavior),
      out);
}

void metaspace(Piece piece, const PreTokenizerStep& step, std::vector<Piece>& out) {
  std::string text;
  text.reserve(piece.text.size() + step.replacement.size());
  for (char c : piece.text) {
    if (c == ' ') {
      text.append(step.replacement);
    } else {
      text.push_back(c);
    }
  }
  const bool starts_with_replacement = text.starts_with(step.replacement);
  const bool prepend = !starts_with_replacement &&
                       (step.prepend_scheme == PrependScheme::kAlways ||
                        (step.prepend_scheme == PrependScheme::kFirst && piece.at_text_start));
  if (prepend) text.insert(0, step.replacement);
  piece.text = std::move(text);
  if (!step.split) {
    out.push_back(std::move(piece));
    return;
  }
  std::vector<std::pair<std::size_t, std::size_t>> hits;
  for (std::size_t pos = piece.text.find(step.replacement); pos != std::string::npos;
       pos = piece.text.find(step.replacement, pos + step.replacement.size())) {
    hits.emplace_back(pos, pos + step.replacement.size());
  }
  split_piece(piece,
              apply_behavior(cover(piece.text.size(), hits, false), SplitBehavior::kMergedWithNext),
              out);
}

}  // namespace

StatusOr<PreTokenizer> PreTokenizer::create(std::vector<PreTokenizerStep> steps) {
  PreTokenizer pre;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == PreTokenizerStep::Kind::kByteLevel) {
      if (i + 1 != steps.size()) {
        return unimplemented(
            "a ByteLevel pre-tokenizer followed by other pre-tokenizers is not supported; "
            "ByteLevel must be the last step of the Sequence");
      }
      pre.byte_level_ = true;
    }
  }
  pre.steps_ = std::move(steps);
  return pre;
}

void PreTokenizer::split(std::string_view segment, bool at_text_start,
                         std::vector<std::string>& words) const {
  std::vector<Piece> pieces{{std::string(segment), at_text_start}};
  std::vector<Piece> next;
  for (const PreTokenizerStep& step : steps_) {
    next.clear();
    for (Piece& piece : pieces) {
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          split_regex(piece, *step.regex, step.behavior, step.invert, next);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && !piece.text.starts_with(' ')) piece.text.insert(0, " ");
          if (step.regex) {
            split_regex(piece, *step.regex, SplitBehavior::kIsolated, false, next);
          } else {
            next.push_back(std::move(piece));
          }
          break;
        case PreTokenizerStep::Kind::kMetaspace: metaspace(std::move(piece), step, next); break;
      }
    }
    pieces.swap(next);
  }
  for (Piece& piece : pieces) {
    if (!piece.text.empty()) words.push_back(std::move(piece.text));
  }
}

}  // namespace pagoda
