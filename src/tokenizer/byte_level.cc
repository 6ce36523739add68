#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

bool maps_to_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
}

// Decodes the (valid, at most 2-byte) code point at the front of `s`, or returns -1.
int decode_alphabet_char(std::string_view s, std::size_t& len) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  if ((b0 & 0xE0) != 0xC0 || s.size() < 2) return -1;
  const auto b1 = static_cast<unsigned char>(s[1]);
  if ((b1 & 0xC0) != 0x80) return -1;
  len = 2;
  return ((b0 & 0x1F) << 6) | (b1 & 0x3F);
}

}  // namespace

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_code_point_.fill(-1);
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    code_point_of_[b] = maps_to_itself(b) ? static_cast<char32_t>(b) : next++;
    byte_of_code_point_[code_point_of_[b]] = static_cast<short>(b);
    append_code_point(code_point_of_[b], spelled_[b]);
  }
}

void ByteLevelAlphabet::spell_all(std::string_view bytes, std::string& out) const {
  for (char c : bytes) out.append(spelled_[static_cast<unsigned char>(c)]);
}

std::optional<unsigned char> ByteLevelAlphabet::byte_of(char32_t code_point) const {
  if (code_point >= byte_of_code_point_.size() || byte_of_code_point_[code_point] < 0) {
    return std::nullopt;
  }
  return static_cast<unsigned char>(byte_of_code_point_[code_point]);
}

bool ByteLevelAlphabet::unspell(std::string_view piece, std::string& out) const {
  const std::size_t start = out.size();
  while (!piece.empty()) {
    std::size_t len = 0;
    const int cp = decode_alphabet_char(piece, len);
    const auto byte = cp < 0 ? std::nullopt : byte_of(static_cast<char32_t>(cp));
    if (!byte) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(*byte));
    piece.remove_prefix(len);
  }
  return true;
}

}  // namespace pagoda
