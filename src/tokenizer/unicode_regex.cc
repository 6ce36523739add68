#include "tokenizer/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/check.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

pcre2_code* as_code(void* code) {
  return static_cast<pcre2_code*>(code);
}

}  // namespace

StatusOr<std::shared_ptr<const UnicodeRegex>> UnicodeRegex::compile(const std::string& pattern,
                                                                    bool literal) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2 refuses UCP beside LITERAL (Unicode classes mean nothing in plain text): a string
  // pattern such as Gemma's Split(" ") would not load.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return invalid_argument("pre-tokenizer regex /" + pattern + "/ does not compile at offset " +
                            std::to_string(error_offset) + ": " +
                            reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation: where the platform lacks it, the interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::shared_ptr<const UnicodeRegex>(new UnicodeRegex(pattern, code));
}

UnicodeRegex::~UnicodeRegex() {
  pcre2_code_free(as_code(code_));
}

std::vector<std::pair<std::size_t, std::size_t>> UnicodeRegex::find_all(
    std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(as_code(code_), nullptr);
  PAGODA_CHECK(data != nullptr) << "out of memory for PCRE2 match data";
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start < text.size()) {
    // The text was validated once; checking it again on every call would make matching quadratic.
    const int rc =
        pcre2_match(as_code(code_), subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // Resource limits (match or JIT stack) on hostile input: keep the rest as one piece, which
      // still encodes losslessly, rather than failing the request.
      matches.emplace_back(start, text.size());
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      if (begin >= text.size()) break;
      start = begin + utf8_char_length(static_cast<unsigned char>(text[begin]));
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

}  // namespace pagoda
