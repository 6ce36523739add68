// Streaming detokenization for generated tokens: fed one id at a time, it returns only text that
// is final, so a character split across tokens is never emitted half-way and the concatenated
// output is, at every step, a prefix of decode(all ids so far); flush() at the end returns the
// rest (e.g. an incomplete byte sequence as U+FFFD, exactly as decode() would).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pagoda/tokenizer.h"

namespace pagoda {

/// Per-request detokenizer; `tokenizer` must outlive it.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, const DecodeOptions& options = {});

  /// Feeds one id; returns the newly final text (often empty while a character is incomplete).
  std::string add(std::int32_t id);
  /// Ends the sequence and returns the held-back text.
  std::string flush();
  /// All text returned so far.
  const std::string& text() const { return text_; }
  /// How many ids were fed.
  std::size_t num_tokens() const { return num_tokens_; }

 private:
  std::unique_ptr<DecodeStream> stream_;
  std::string text_;
  std::size_t num_tokens_ = 0;
};

}  // namespace pagoda
