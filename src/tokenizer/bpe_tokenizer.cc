#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

class BpeDecodeStream final : public DecodeStream {
 public:
  BpeDecodeStream(const BpeTokenizer& tokenizer, const DecodeOptions& options)
      : tokenizer_(tokenizer), options_(options), decoder_(tokenizer.decoder()) {}

  std::string push(std::int32_t id) override {
    // Like tokenizers, ids outside the vocabulary are skipped rather than rejected.
    const auto piece = tokenizer_.token_to_piece(id);
    if (!piece || (options_.skip_special_tokens && tokenizer_.is_special(id))) return {};
    return decoder_.push(*piece);
  }
  std::string finish() override { return decoder_.finish(); }

 private:
  const BpeTokenizer& tokenizer_;
  DecodeOptions options_;
  PieceDecoder decoder_;
};

}  // namespace

StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(TokenizerParts parts,
                                                             const std::string& source) {
  if (!parts.model) return internal_error(source + ": tokenizer has no model");
  const bool byte_level_model = parts.model->byte_level();
  if (parts.pre_tokenizer.byte_level() != byte_level_model) {
    return unimplemented(source +
                         ": a ByteLevel pre-tokenizer without a byte-level vocabulary (or the "
                         "reverse) is not supported");
  }
  if (byte_level_model != (parts.decoder.kind == DecoderConfig::Kind::kByteLevel)) {
    return unimplemented(source +
                         ": the decoder must be ByteLevel exactly when the pre-tokenizer "
                         "is; this combination is not supported");
  }
  for (const AddedToken& token : parts.added.tokens()) {
    if (token.id < 0 || token.id >= kMaxVocabSize) {
      return invalid_argument(source + ": added token \"" + token.content + "\" has id " +
                              std::to_string(token.id) + ", outside [0, " +
                              std::to_string(kMaxVocabSize) + ")");
    }
  }
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(parts)));
}

BpeTokenizer::BpeTokenizer(TokenizerParts parts) : parts_(std::move(parts)) {
  vocab_size_ = parts_.model->size();
  for (const AddedToken& token : parts_.added.tokens()) {
    vocab_size_ = std::max(vocab_size_, token.id + 1);
  }
}

void BpeTokenizer::encode_text(const TextSegment& segment, bool parse_special,
                               std::vector<std::int32_t>& ids) const {
  // Added tokens flagged `normalized` are matched only now, on the normalized text.
  std::string normalized =
      parts_.normalizer.empty() ? segment.text : parts_.normalizer.apply(segment.text);
  std::vector<TextSegment> pieces;
  if (parts_.added.has_normalized()) {
    pieces = parts_.added.split(normalized, segment.at_text_start, true, parse_special);
  } else {
    pieces.push_back({std::move(normalized), std::nullopt, segment.at_text_start});
  }
  std::vector<std::string> words;
  for (const TextSegment& piece : pieces) {
    if (piece.token_id) {
      ids.push_back(*piece.token_id);
      continue;
    }
    words.clear();
    parts_.pre_tokenizer.split(piece.text, piece.at_text_start, words);
    for (const std::string& word : words) parts_.model->encode_word(word, ids);
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text,
                                               const EncodeOptions& options) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    append_utf8_lossy(text, repaired);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  if (options.add_special_tokens) ids = parts_.prefix_ids;
  for (const TextSegment& segment : parts_.added.split(text, true, false, options.parse_special)) {
    if (segment.token_id) {
      ids.push_back(*segment.token_id);
    } else {
      encode_text(segment, options.parse_special, ids);
    }
  }
  if (options.add_special_tokens) {
    ids.insert(ids.end(), parts_.suffix_ids.begin(), parts_.suffix_ids.end());
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids,
                                 const DecodeOptions& options) const {
  BpeDecodeStream stream(*this, options);
  std::string out;
  for (std::int32_t id : ids) out.append(stream.push(id));
  out.append(stream.finish());
  return out;
}

std::unique_ptr<DecodeStream> BpeTokenizer::start_decode(const DecodeOptions& options) const {
  return std::make_unique<BpeDecodeStream>(*this, options);
}

std::optional<std::string_view> BpeTokenizer::token_to_piece(std::int32_t id) const {
  if (const AddedToken* token = parts_.added.find(id)) return token->content;
  return parts_.model->id_to_piece(id);
}

std::optional<std::int32_t> BpeTokenizer::piece_to_token(std::string_view piece) const {
  if (const auto id = parts_.added.find(piece)) return id;
  return parts_.model->piece_to_id(piece);
}

bool BpeTokenizer::is_special(std::int32_t id) const {
  const AddedToken* token = parts_.added.find(id);
  return token != nullptr && token->special;
}

}  // namespace pagoda
