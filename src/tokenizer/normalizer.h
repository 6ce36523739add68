// Normalizers that rewrite text before pre-tokenization. Only the steps SentencePiece-style BPE
// tokenizer.json files use are supported (Prepend "▁", Replace " " -> "▁"); the loader rejects the
// rest (NFC, Lowercase, ...) with UNIMPLEMENTED rather than tokenizing differently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

/// One normalizer step, as tokenizer.json names it.
struct NormalizerStep {
  enum class Kind { kPrepend, kReplace };
  Kind kind = Kind::kReplace;
  /// Replace: the literal text to find.
  std::string pattern;
  /// Prepend: the prefix; Replace: the replacement.
  std::string content;
};

/// A sequence of steps applied to each run of text between added tokens.
class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  /// Whether there is nothing to do.
  bool empty() const { return steps_.empty(); }
  /// The normalized form of `text`.
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace pagoda
