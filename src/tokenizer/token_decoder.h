// Turns token spellings back into text, streaming. Two pipelines cover the tokenizer.json decoders
// in use: ByteLevel (each character back to its byte, then UTF-8 with U+FFFD for bad sequences)
// and the SentencePiece one (Replace "▁" -> " ", ByteFallback "<0xNN>", Fuse, Strip a leading
// space). Each stream emits only text that no later token can change, so its output, however it
// is cut, concatenates to the full decode.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda {

/// The decoder a tokenizer uses.
struct DecoderConfig {
  enum class Kind { kByteLevel, kPieces };
  Kind kind = Kind::kByteLevel;
  /// kPieces: literal replacements applied to each token, in order.
  std::vector<std::pair<std::string, std::string>> replacements;
  /// kPieces: runs of "<0xNN>" tokens become their bytes when valid UTF-8, else one U+FFFD each.
  bool byte_fallback = false;
  /// kPieces: how many leading `strip_content` characters to drop from the fused text.
  std::size_t strip_start = 0;
  char strip_content = ' ';
};

/// Streaming state for one decode.
class PieceDecoder {
 public:
  explicit PieceDecoder(const DecoderConfig& config) : config_(config) {}

  /// Feeds one token spelling; returns the text that is now final.
  std::string push(std::string_view piece);
  /// Returns whatever was held back.
  std::string finish();

 private:
  std::string push_bytes(std::string_view piece);
  std::string push_piece(std::string_view piece);
  std::string flush_byte_run();
  std::string strip(std::string text);

  const DecoderConfig& config_;
  // kByteLevel: bytes of an incomplete UTF-8 character. kPieces: the pending <0xNN> run.
  std::string pending_;
  std::size_t strip_left_ = 0;
  bool strip_done_ = false;
};

}  // namespace pagoda
