#include "api/token_spelling.h"

#include <array>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda::api {

namespace {

// "<0x0A>" -> 0x0A.
std::optional<unsigned char> byte_fallback_piece(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return {};
  unsigned value = 0;
  for (const char c : piece.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else {
      return {};
    }
  }
  return static_cast<unsigned char>(value);
}

}  // namespace

TokenSpelling spell_token(const Tokenizer& tokenizer, std::int32_t id) {
  const std::array<std::int32_t, 1> ids = {id};
  TokenSpelling spelling{.text = tokenizer.decode(ids, {.skip_special_tokens = false}),
                         .bytes = {}};
  spelling.bytes = spelling.text;
  if (spelling.text.find(kReplacementChar) == std::string::npos) return spelling;
  const std::optional<std::string_view> piece = tokenizer.token_to_piece(id);
  if (!piece) return spelling;
  if (const std::optional<unsigned char> byte = byte_fallback_piece(*piece)) {
    spelling.bytes = std::string(1, static_cast<char>(*byte));
    return spelling;
  }
  std::string raw;
  if (ByteLevelAlphabet::get().unspell(*piece, raw)) spelling.bytes = std::move(raw);
  return spelling;
}

}  // namespace pagoda::api
