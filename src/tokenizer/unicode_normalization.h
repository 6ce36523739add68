// The Unicode operations behind tokenizer.json's normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// StripAccents), computed with utf8proc so that no Unicode tables live in Pagoda. Each one follows
// what Hugging Face `tokenizers` (Rust) does, character for character. Input is UTF-8; invalid
// bytes are first replaced with U+FFFD, as the tokenizer itself does before normalizing.
#pragma once

#include <string>
#include <string_view>

namespace pagoda {

/// The Unicode normalization forms of UAX #15.
enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };

/// `text` in normalization form `form`.
std::string normalize_unicode(std::string_view text, NormalizationForm form);

/// Rust's `char::to_lowercase` applied to every character: the full, context-free lowercase
/// mapping (no final-sigma rule, U+0130 becomes "i" + U+0307).
std::string to_lowercase(std::string_view text);

/// `text` without the leading (`left`) and trailing (`right`) characters that Rust's
/// `char::is_whitespace` accepts (the Unicode White_Space property).
std::string_view strip_whitespace(std::string_view text, bool left, bool right);

/// `text` without combining marks (general categories Mn, Mc, Me).
std::string remove_combining_marks(std::string_view text);

}  // namespace pagoda
