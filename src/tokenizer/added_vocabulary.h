// Added tokens (specials like "<|im_start|>" and user-defined ones like "<think>") are cut out of
// the text before normalization and pre-tokenization, leftmost-longest, as in Hugging Face
// `tokenizers`: tokens with normalized=false match the raw text, normalized ones match afterwards,
// in their normalized spelling (with a Lowercase normalizer, "<Think>" matches "<think>").
// The patterns live in a byte trie, so a scan costs at most the longest pattern's length per input
// byte, however many tokens share a prefix (Gemma 3 has 6,000 "<unusedN>" tokens).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/normalizer.h"

namespace pagoda {

/// One added token with the flags tokenizer.json gives it.
struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  /// Swallows whitespace on its left / right when matched.
  bool lstrip = false;
  bool rstrip = false;
  /// Matched after normalization (else on the raw text).
  bool normalized = false;
  /// Matched only when not inside a word.
  bool single_word = false;
};

/// A run of the input: either text to tokenize or one added token.
struct TextSegment {
  std::string text;
  /// The added token's id; nullopt for plain text.
  std::optional<std::int32_t> token_id;
  /// Whether the segment starts at byte 0 of the whole input.
  bool at_text_start = false;
};

/// The added tokens of a tokenizer and the matcher that finds them.
class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  /// `normalizer` gives the spelling that tokens with normalized=true are matched in.
  explicit AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer& normalizer = {});

  /// Splits `text` on the tokens whose `normalized` flag equals `normalized`. With
  /// `parse_special` false, special tokens are left in the text.
  std::vector<TextSegment> split(std::string_view text, bool at_text_start, bool normalized,
                                 bool parse_special) const;

  /// The added token with this id, if any.
  const AddedToken* find(std::int32_t id) const;
  /// The id of the added token spelled `content`, if any.
  std::optional<std::int32_t> find(std::string_view content) const;
  /// Whether any token has normalized=true (a second matching pass is needed).
  bool has_normalized() const { return has_normalized_; }
  /// All added tokens.
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  // What each token matches: its content, normalized when the token has normalized=true.
  std::vector<std::string> patterns_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  std::unordered_map<std::string, std::int32_t> by_content_;
  // A byte trie over patterns_. A node ends a pattern for the normalized=false and the
  // normalized=true pass separately (the first token with that pattern, else -1).
  struct TrieNode {
    std::vector<std::pair<unsigned char, std::int32_t>> children;
    std::array<std::int32_t, 2> token_index = {-1, -1};
  };
  void insert(std::size_t index);
  /// The index and length of the longest pattern for the `normalized` pass at text[pos...].
  std::optional<std::pair<std::size_t, std::size_t>> longest_match(std::string_view text,
                                                                   std::size_t pos,
                                                                   bool normalized) const;
  std::vector<TrieNode> trie_ = std::vector<TrieNode>(1);  // The root first.
  bool has_normalized_ = false;
};

}  // namespace pagoda
