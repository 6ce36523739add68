// Normalizers that rewrite text before pre-tokenization, with the byte-for-byte semantics of
// Hugging Face `tokenizers`: the Unicode forms (Qwen2's NFC, NFKC, ...), Lowercase, Strip,
// StripAccents, Replace and Prepend, chained by Sequence. Offsets are not tracked: Pagoda never
// maps tokens back to the input. The loader rejects the others (BertNormalizer, Precompiled, ...)
// with UNIMPLEMENTED rather than tokenizing differently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_normalization.h"
#include "tokenizer/unicode_regex.h"

namespace pagoda {

/// One normalizer step, as tokenizer.json names it.
struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kUnicode, kLowercase, kStrip, kStripAccents };
  Kind kind = Kind::kReplace;
  /// Replace: the literal text to find (when `regex` is null).
  std::string pattern;
  /// Replace: the pattern given as {"Regex": ...}.
  std::shared_ptr<const UnicodeRegex> regex;
  /// Prepend: the prefix; Replace: the replacement.
  std::string content;
  /// Unicode: the form (NFC, NFD, NFKC, NFKD).
  NormalizationForm form = NormalizationForm::kNfc;
  /// Strip: which ends lose their whitespace.
  bool strip_left = true;
  bool strip_right = true;
};

/// A sequence of steps applied to each run of text between added tokens.
class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  /// Whether there is nothing to do.
  bool empty() const { return steps_.empty(); }
  /// The normalized form of `text` (invalid UTF-8 is first repaired with U+FFFD).
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace pagoda
