// GPT-2's byte-to-unicode alphabet: every byte gets a printable code point (printable Latin-1 bytes
// map to themselves, the rest to U+0100 onwards), so a byte-level vocabulary can spell any byte
// sequence with visible characters ("Ġ" is the space byte).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace pagoda {

/// The byte <-> code point tables, built once.
class ByteLevelAlphabet {
 public:
  /// The process-wide tables.
  static const ByteLevelAlphabet& get();

  /// The UTF-8 spelling of `byte` in the alphabet.
  std::string_view spell(unsigned char byte) const { return spelled_[byte]; }
  /// Appends the spelling of every byte of `bytes` to `out`.
  void spell_all(std::string_view bytes, std::string& out) const;
  /// The byte a code point stands for, if it is in the alphabet.
  std::optional<unsigned char> byte_of(char32_t code_point) const;
  /// Appends the bytes `piece` spells; false (and nothing appended) if any character is outside
  /// the alphabet or `piece` is not valid UTF-8.
  bool unspell(std::string_view piece, std::string& out) const;

 private:
  ByteLevelAlphabet();

  std::array<std::string, 256> spelled_;
  std::array<char32_t, 256> code_point_of_{};
  // Indexed by code point; -1 where the code point is not in the alphabet.
  std::array<short, 0x144> byte_of_code_point_{};
};

}  // namespace pagoda
