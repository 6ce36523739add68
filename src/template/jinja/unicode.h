// UTF-8 helpers that give template strings Python's code-point semantics (len, indexing, strip).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

/// Byte offsets of each code point start in `s`, plus s.size() at the end.
std::vector<std::size_t> code_point_offsets(std::string_view s);
/// Number of code points; invalid bytes count as one each.
std::size_t code_point_count(std::string_view s);
/// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(std::string& out, char32_t cp);
/// Decodes the code point at `pos` and advances `pos` past it.
char32_t decode_utf8(std::string_view s, std::size_t& pos);
/// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);
/// Python's str.strip() family without arguments: `left`/`right` choose the ends.
std::string_view strip_python_space(std::string_view s, bool left, bool right);
/// Python's str.strip(chars): removes any code point of `chars` from the chosen ends.
std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right);
/// ASCII case mapping; other code points pass through unchanged.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
/// Python's str.title() and str.capitalize() over ASCII letters.
std::string to_title(std::string_view s);
std::string to_capitalized(std::string_view s);

}  // namespace pagoda::jinja
