// Builds a tokenizer from GGUF metadata (tokenizer.ggml.*), matching what transformers'
// from_pretrained(..., gguf_file=...) builds for the same file, except where the file says more:
// `tokenizer.ggml.pre` picks the pre-tokenizer the vocabulary was trained with (see
// gguf_pre_tokenizers.h), e.g. SmolLM2's per-digit split, which transformers' conversion drops.
#pragma once

#include <memory>

#include "model/gguf_file.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda {

/// "gpt2" (byte-level BPE) and "llama" (SentencePiece BPE) vocabularies; others UNIMPLEMENTED.
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_from_gguf(const GgufFile& gguf);

}  // namespace pagoda
