// The Tokenizer implementation behind both loaders: added-token splitting, normalizer,
// pre-tokenizer, BPE model, post-processor (BOS/EOS) and decoder, composed in the order Hugging
// Face `tokenizers` runs them. Byte-level (GPT-2, Llama 3, Qwen2, SmolLM2) and SentencePiece-style
// (Llama 2, Mistral) BPE differ only in the parts the loader plugs in.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "pagoda/tokenizer.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_decoder.h"

namespace pagoda {

/// Everything a BpeTokenizer is made of; the loaders fill it in.
struct TokenizerParts {
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  DecoderConfig decoder;
  /// What the post-processor puts around the ids when add_special_tokens is set.
  std::vector<std::int32_t> prefix_ids;
  std::vector<std::int32_t> suffix_ids;
  std::optional<std::int32_t> bos_id;
  std::optional<std::int32_t> eos_id;
  std::optional<std::int32_t> pad_id;
};

/// A BPE tokenizer assembled from parts.
class BpeTokenizer final : public Tokenizer {
 public:
  /// Checks that the parts agree (ByteLevel pre-tokenizer iff byte-level model and decoder).
  static StatusOr<std::unique_ptr<BpeTokenizer>> create(TokenizerParts parts,
                                                        const std::string& source);

  std::vector<std::int32_t> encode(std::string_view text,
                                   const EncodeOptions& options) const override;
  std::string decode(std::span<const std::int32_t> ids,
                     const DecodeOptions& options) const override;
  std::unique_ptr<DecodeStream> start_decode(const DecodeOptions& options) const override;
  std::int32_t vocab_size() const override { return vocab_size_; }
  std::optional<std::string_view> token_to_piece(std::int32_t id) const override;
  std::optional<std::int32_t> piece_to_token(std::string_view piece) const override;
  bool is_special(std::int32_t id) const override;
  std::optional<std::int32_t> bos_id() const override { return parts_.bos_id; }
  std::optional<std::int32_t> eos_id() const override { return parts_.eos_id; }
  std::optional<std::int32_t> pad_id() const override { return parts_.pad_id; }

  /// The decoder configuration (streams reference it).
  const DecoderConfig& decoder() const { return parts_.decoder; }

 private:
  explicit BpeTokenizer(TokenizerParts parts);
  void encode_text(const TextSegment& segment, bool parse_special,
                   std::vector<std::int32_t>& ids) const;

  TokenizerParts parts_;
  std::int32_t vocab_size_ = 0;
};

}  // namespace pagoda
