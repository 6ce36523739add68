// How a single token is shown in logprobs: its text (what decoding it alone gives, as OpenAI and
// vLLM report it) and its exact UTF-8 bytes (OpenAI's `bytes`), which differ when a token holds
// part of a multi-byte character: the text then has U+FFFD, the bytes keep the real ones, and
// concatenating the bytes of consecutive tokens rebuilds the characters.
#pragma once

#include <cstdint>
#include <string>

#include "pagoda/tokenizer.h"

namespace pagoda::api {

/// One token's logprobs spelling.
struct TokenSpelling {
  /// decode([id]) with special tokens kept.
  std::string text;
  /// The token's own bytes (may be an incomplete UTF-8 sequence).
  std::string bytes;
};

/// Spells `id`. Exact bytes come from the vocabulary piece (GPT-2 byte alphabet, or
/// SentencePiece "<0xNN>" byte fallback) when decoding alone had to substitute U+FFFD.
TokenSpelling spell_token(const Tokenizer& tokenizer, std::int32_t id);

}  // namespace pagoda::api
