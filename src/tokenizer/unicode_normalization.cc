#include "tokenizer/unicode_normalization.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

// utf8proc rejects invalid UTF-8; repairing first gives it the text the tokenizer would see.
std::string_view valid_utf8(std::string_view text, std::string& storage) {
  if (is_valid_utf8(text)) return text;
  append_utf8_lossy(text, storage);
  return storage;
}

// The character at byte `pos` of `text` and its length; a stray byte reads as U+FFFD, length 1.
std::pair<char32_t, std::size_t> decode_at(std::string_view text, std::size_t pos) {
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                       static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
  if (n <= 0) return {char32_t{0xFFFD}, 1};
  return {static_cast<char32_t>(cp), static_cast<std::size_t>(n)};
}

// Calls `fn(code_point, character)` for each character of `text`.
template <typename Fn>
void for_each_code_point(std::string_view text, Fn&& fn) {
  for (std::size_t pos = 0; pos < text.size();) {
    const auto [cp, length] = decode_at(text, pos);
    fn(cp, text.substr(pos, length));
    pos += length;
  }
}

// Rust's char::is_whitespace is the White_Space property: these 25 code points, fixed since
// Unicode 6.3. utf8proc has no query for the property (its categories put U+0085 and U+001C..F
// together as Cc), so the list is spelled out.
bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalizationForm form) {
  std::string storage;
  text = valid_utf8(text, storage);
  // Without UTF8PROC_NULLTERM the length bounds the input, so embedded NULs survive.
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalizationForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizationForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizationForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &mapped, static_cast<utf8proc_option_t>(options));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  // The input is valid UTF-8, so only running out of memory fails here; then the text is left
  // as it is rather than dropped.
  if (length < 0) return std::string(text);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
}

std::string to_lowercase(std::string_view text) {
  std::string storage;
  text = valid_utf8(text, storage);
  std::string out;
  out.reserve(text.size());
  for_each_code_point(text, [&](char32_t cp, std::string_view) {
    // The one unconditional multi-character lowercase mapping of SpecialCasing.txt, which
    // utf8proc's single-character mapping leaves out.
    if (cp == 0x130) {
      out.append("i\u0307");
      return;
    }
    append_code_point(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))),
                      out);
  });
  return out;
}

std::string_view strip_whitespace(std::string_view text, bool left, bool right) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (left && begin < end) {
    const auto [cp, length] = decode_at(text, begin);
    if (!is_white_space(cp)) break;
    begin += length;
  }
  while (right && end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const auto [cp, length] = decode_at(text, start);
    if (!is_white_space(cp) || start + length != end) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string remove_combining_marks(std::string_view text) {
  std::string storage;
  text = valid_utf8(text, storage);
  std::string out;
  out.reserve(text.size());
  for_each_code_point(text, [&](char32_t cp, std::string_view character) {
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
      case UTF8PROC_CATEGORY_MN:
      case UTF8PROC_CATEGORY_MC:
      case UTF8PROC_CATEGORY_ME: break;
      default: out.append(character);
    }
  });
  return out;
}

}  // namespace pagoda
