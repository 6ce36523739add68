// A compiled PCRE2 pattern in UTF + UCP mode (\p{L}, \s and friends follow Unicode, as in the
// Oniguruma engine Hugging Face `tokenizers` uses), JIT-compiled where PCRE2 supports it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// An immutable regex; matching is thread-safe.
class UnicodeRegex {
 public:
  /// Compiles `pattern`; `literal` matches it as plain text. The error names the pattern.
  static StatusOr<std::shared_ptr<const UnicodeRegex>> compile(const std::string& pattern,
                                                               bool literal = false);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  /// [begin, end) byte ranges of the non-empty, non-overlapping matches in `text`, which must be
  /// valid UTF-8 (the tokenizer repairs input before it gets here).
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  UnicodeRegex(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}

  std::string pattern_;
  void* code_;  // pcre2_code_8*, kept opaque so PCRE2's header stays out of this one.
};

}  // namespace pagoda
