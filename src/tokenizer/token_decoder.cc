#include "tokenizer/token_decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> the byte, as tokenizers' ByteFallback reads it; -1 for any other token.
int fallback_byte(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]);
  const int lo = hex_digit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

}  // namespace

std::string PieceDecoder::push(std::string_view piece) {
  return config_.kind == DecoderConfig::Kind::kByteLevel ? push_bytes(piece) : push_piece(piece);
}

std::string PieceDecoder::push_bytes(std::string_view piece) {
  // A token with a character outside the alphabet (an added token) contributes its own bytes.
  if (!ByteLevelAlphabet::get().unspell(piece, pending_)) pending_.append(piece);
  const std::size_t stable = utf8_stable_prefix(pending_);
  std::string out;
  append_utf8_lossy(std::string_view(pending_).substr(0, stable), out);
  pending_.erase(0, stable);
  return out;
}

std::string PieceDecoder::flush_byte_run() {
  std::string out;
  if (pending_.empty()) return out;
  if (is_valid_utf8(pending_)) {
    out = std::move(pending_);
  } else {
    for (std::size_t i = 0; i < pending_.size(); ++i) out.append(kReplacementChar);
  }
  pending_.clear();
  return out;
}

std::string PieceDecoder::push_piece(std::string_view piece) {
  std::string text(piece);
  for (const auto& [from, to] : config_.replacements) text = replace_all(std::move(text), from, to);
  if (config_.byte_fallback) {
    const int byte = fallback_byte(text);
    if (byte >= 0) {
      // The whole run is judged at once, so nothing of it is final until it ends.
      pending_.push_back(static_cast<char>(byte));
      return {};
    }
  }
  std::string out = flush_byte_run();
  out.append(text);
  return strip(std::move(out));
}

std::string PieceDecoder::strip(std::string text) {
  if (strip_done_ || text.empty()) return text;
  std::size_t cut = 0;
  while (strip_left_ < config_.strip_start && cut < text.size() &&
         text[cut] == config_.strip_content) {
    ++cut;
    ++strip_left_;
  }
  // Stripping stops at the first other character, or once strip_start were removed.
  if (cut < text.size() || strip_left_ >= config_.strip_start) strip_done_ = true;
  return text.substr(cut);
}

std::string PieceDecoder::finish() {
  if (config_.kind == DecoderConfig::Kind::kByteLevel) {
    std::string out;
    append_utf8_lossy(pending_, out);
    pending_.clear();
    return out;
  }
  return strip(flush_byte_run());
}

}  // namespace pagoda
