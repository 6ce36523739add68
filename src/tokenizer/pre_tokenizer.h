// Pre-tokenizers cut normalized text into words before BPE, with the semantics of Hugging Face
// `tokenizers`: Split (regex or literal, with its five delimiter behaviours), Digits (a Split on
// \p{N}), ByteLevel (optional prefix space and GPT-2's regex; its byte-to-alphabet mapping is
// left to the BPE model, which works on bytes), and Metaspace (" " -> "▁" with a prepend scheme).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"
#include "tokenizer/unicode_regex.h"

namespace pagoda {

/// What Split does with the matched delimiters.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// When Metaspace prepends the replacement character.
enum class PrependScheme { kAlways, kFirst, kNever };

/// GPT-2's pre-tokenizer regex, used by ByteLevel with use_regex.
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// One pre-tokenizer step.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  Kind kind = Kind::kSplit;
  /// Split: the delimiter; ByteLevel: GPT-2's regex when use_regex, else null.
  std::shared_ptr<const UnicodeRegex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  /// Split: the pieces between matches are the delimiters instead.
  bool invert = false;
  /// ByteLevel: prepend " " to text that does not start with one.
  bool add_prefix_space = false;
  /// Metaspace: the character standing for a space (normally "▁").
  std::string replacement;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  /// Metaspace: also split before every replacement character.
  bool split = false;
};

/// A sequence of steps. ByteLevel may only come last: it hands raw bytes to the model.
class PreTokenizer {
 public:
  PreTokenizer() = default;
  /// Validates the order of the steps.
  static StatusOr<PreTokenizer> create(std::vector<PreTokenizerStep> steps);

  /// Whether the last step is ByteLevel, i.e. words are raw bytes for a byte-level model.
  bool byte_level() const { return byte_level_; }
  /// Appends the words of `segment`; `at_text_start` says it begins the whole input (Metaspace's
  /// "first" scheme prepends only there).
  void split(std::string_view segment, bool at_text_start, std::vector<std::string>& words) const;

 private:
  std::vector<PreTokenizerStep> steps_;
  bool byte_level_ = false;
};

}  // namespace pagoda
