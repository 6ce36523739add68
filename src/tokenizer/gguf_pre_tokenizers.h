// The one table from GGUF's `tokenizer.ggml.pre` (the pre-tokenizer name llama.cpp's converter
// records) to the equivalent Hugging Face pre-tokenizer steps.
#pragma once

#include <string>
#include <vector>

#include "pagoda/status.h"
#include "tokenizer/pre_tokenizer.h"

namespace pagoda {

/// The pre-tokenizer a byte-level GGUF vocabulary was trained with.
struct GgufPreTokenizer {
  std::vector<PreTokenizerStep> steps;
  /// Llama 3's tokenizer.json sets ignore_merges.
  bool ignore_merges = false;
};

/// Steps for `pre` (e.g. "smollm", "llama-bpe", "qwen2"); UNIMPLEMENTED names unknown ones.
StatusOr<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& pre, const std::string& source);

}  // namespace pagoda
