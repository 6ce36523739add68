#include "structured/token_vocabulary.h"

#include <algorithm>

#include "structured/xgrammar_handles.h"

namespace pagoda::structured {

namespace {

// How the tokenizer's pieces spell bytes: SentencePiece-style pieces carry "<0x0A>" byte tokens
// and "▁" for spaces; GPT-2-style byte-level pieces map every byte to a printable character
// ("Ġ" is the space); anything else is taken as the raw text.
xgrammar::VocabType detect_vocab_type(const Tokenizer& tokenizer) {
  if (tokenizer.piece_to_token("<0x0A>")) return xgrammar::VocabType::BYTE_FALLBACK;
  if (tokenizer.piece_to_token("\xC4\xA0") || tokenizer.piece_to_token("\xC4\x8A")) {
    return xgrammar::VocabType::BYTE_LEVEL;
  }
  return xgrammar::VocabType::RAW;
}

xgrammar::TokenizerInfo make_info(const Tokenizer& tokenizer, std::int64_t vocab_size,
                                  const std::vector<std::int32_t>& stop_token_ids) {
  // Ids past the logits width can never be sampled; ids past the tokenizer's are never allowed.
  const std::int64_t num_pieces = std::min<std::int64_t>(tokenizer.vocab_size(), vocab_size);
  std::vector<std::string> pieces(static_cast<std::size_t>(num_pieces));
  for (std::int32_t id = 0; id < num_pieces; ++id) {
    // xgrammar reads an empty piece as a special token, which no grammar produces.
    if (tokenizer.is_special(id)) continue;
    if (const std::optional<std::string_view> piece = tokenizer.token_to_piece(id)) {
      pieces[static_cast<std::size_t>(id)] = std::string(*piece);
    }
  }
  const xgrammar::VocabType type = detect_vocab_type(tokenizer);
  return xgrammar::TokenizerInfo(pieces, type, static_cast<int>(vocab_size), stop_token_ids,
                                 /*add_prefix_space=*/type == xgrammar::VocabType::BYTE_FALLBACK);
}

}  // namespace

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer, std::int64_t vocab_size,
                                 std::vector<std::int32_t> stop_token_ids)
    : vocab_size_(vocab_size),
      impl_(std::make_unique<Impl>(Impl{make_info(tokenizer, vocab_size, stop_token_ids)})) {}

TokenVocabulary::~TokenVocabulary() = default;

std::string_view TokenVocabulary::token_bytes(std::int32_t id) const {
  const std::vector<std::string>& decoded = impl_->info.GetDecodedVocab();
  if (id < 0 || static_cast<std::size_t>(id) >= decoded.size()) return {};
  return decoded[static_cast<std::size_t>(id)];
}

}  // namespace pagoda::structured
