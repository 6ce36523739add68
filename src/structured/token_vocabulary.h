// A model's vocabulary as the grammar engine needs it: each token id's bytes (special tokens
// have none, so no grammar can produce them) and how the tokenizer spells bytes in its pieces.
// Built once per served model from the Tokenizer contract.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/tokenizer.h"

namespace pagoda::structured {

class TokenVocabulary {
 public:
  struct Impl;  // xgrammar's TokenizerInfo (xgrammar_handles.h)
  /// `vocab_size` is the model's logits width (ids the tokenizer lacks are never allowed);
  /// `stop_token_ids` end a constrained output once its grammar is complete (EOS).
  TokenVocabulary(const Tokenizer& tokenizer, std::int64_t vocab_size,
                  std::vector<std::int32_t> stop_token_ids);
  ~TokenVocabulary();

  std::int64_t vocab_size() const { return vocab_size_; }
  /// The bytes token `id` stands for in the output (empty for special and unknown ids).
  std::string_view token_bytes(std::int32_t id) const;
  const Impl& impl() const { return *impl_; }

 private:
  std::int64_t vocab_size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::structured
