// UTF-8 helpers with the exact replacement policy of Rust's String::from_utf8_lossy, which
// Hugging Face `tokenizers` uses when decoding: each maximal invalid subpart becomes one U+FFFD.
// Matching it byte for byte is what lets decode() equal the reference on broken byte sequences.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda {

/// The UTF-8 encoding of U+FFFD.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

/// Appends `bytes` to `out`, replacing each maximal invalid subpart with U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);

/// Whether `bytes` is entirely valid UTF-8.
bool is_valid_utf8(std::string_view bytes);

/// Length of the longest prefix after which a decoder is between characters: everything except
/// a trailing sequence that is valid so far but incomplete (at most 3 bytes).
std::size_t utf8_stable_prefix(std::string_view bytes);

/// Byte length of the (valid) UTF-8 character starting with `lead`; 1 for a stray byte.
std::size_t utf8_char_length(unsigned char lead);

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_code_point(char32_t code_point, std::string& out);

}  // namespace pagoda
