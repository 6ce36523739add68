#include "tokenizer/incremental_detokenizer.h"

namespace pagoda {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               const DecodeOptions& options)
    : stream_(tokenizer.start_decode(options)) {}

std::string IncrementalDetokenizer::add(std::int32_t id) {
  ++num_tokens_;
  std::string piece = stream_->push(id);
  text_.append(piece);
  return piece;
}

std::string IncrementalDetokenizer::flush() {
  std::string piece = stream_->finish();
  text_.append(piece);
  return piece;
}

}  // namespace pagoda
