// Finds a request's stop strings in its streamed text and decides how much of the text is safe
// to send. Text is fed as the detokenizer produces it; a tail that could still grow into a stop
// string is held back and released once it cannot:
//
//   stops {"</s>"}    fed "Hi <"  -> release "Hi ", hold "<"
//                     fed "/"     -> release "",    hold "</"
//                     fed "p>"    -> release "</p>" (no stop starts there any more), hold ""
//                     fed "</s>!" -> match "</s>": release "" (or "</s>" when included), done
//
// Semantics follow vLLM: the output is cut before the stop string (after it with
// include_stop_str_in_output, which also needs no holdback, since a candidate is sent either
// way). Where several stop strings match, the one that is complete first in the text wins, and
// of those ending at the same byte the longest; so the result never depends on how the text
// was split into tokens. (vLLM instead takes the first stop string in list order found in the
// new text.)
//
// The stop strings form an Aho-Corasick automaton over bytes: each fed byte costs amortized
// O(1), nothing is rescanned, and the automaton's state is exactly the longest tail that is
// still a stop-string prefix, i.e. what must be held back. Text and stop strings are valid
// UTF-8, which is self-synchronizing, so matches and held tails begin on character boundaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::engine {

/// Streaming matcher for one request's stop strings.
class StopStringMatcher {
 public:
  /// At most this many stop strings per request.
  static constexpr std::size_t kMaxStopStrings = 64;
  /// At most this many bytes per stop string (also bounds the held-back text).
  static constexpr std::size_t kMaxStopStringBytes = 512;

  /// INVALID_ARGUMENT for too many stop strings, or one that is empty, too long or not UTF-8.
  static Status validate(std::span<const std::string> stop_strings);

  /// `stop_strings` must pass validate() (CHECKed).
  StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_str_in_output);

  /// What one feed() makes final.
  struct Result {
    /// Text safe to send now.
    std::string released;
    /// Index into the stop strings of the one that matched; the matcher is then done.
    std::optional<std::size_t> matched;
  };

  /// Appends detokenized text. With `detect` false (before min_tokens) no match is reported
  /// that ends inside `text`, but its bytes still count as the start of a later match.
  Result feed(std::string_view text, bool detect = true);
  /// Ends the text: releases what was held back (nothing can match any more).
  std::string flush();

  /// Whether a stop string has matched.
  bool matched() const { return matched_; }
  /// The stop strings, in the caller's order.
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }

 private:
  static constexpr std::int32_t kRoot = 0;
  static constexpr std::int32_t kNone = -1;

  // One trie node: the bytes from the root spell a prefix of some stop string.
  struct Node {
    // Outgoing edges (byte, node), few per node: a linear scan beats a 256-entry table.
    std::vector<std::pair<unsigned char, std::int32_t>> next;
    // Longest proper suffix of this node's string that is also a node.
    std::int32_t fail = kRoot;
    std::int32_t depth = 0;
    // The longest stop string that ends here (this node's or a suffix's), or kNone.
    std::int32_t match = kNone;
    // Length of the longest suffix of this node's string that a stop string extends: the text
    // to hold back in this state.
    std::int32_t hold = 0;
  };

  void build();
  std::int32_t child(std::int32_t node, unsigned char byte) const;
  std::int32_t step(std::int32_t state, unsigned char byte) const;

  std::vector<std::string> stop_strings_;
  bool include_stop_str_in_output_ = false;
  std::vector<Node> nodes_;
  std::int32_t state_ = kRoot;
  // Fed but not yet released text; always the last nodes_[state_].hold bytes between feeds.
  std::string pending_;
  bool matched_ = false;
};

}  // namespace pagoda::engine
