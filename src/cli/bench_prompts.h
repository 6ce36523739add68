// The prompts of `pagoda bench offline`: random tokens (raw throughput), or a grounded task
// (the model asked to repeat a given passage, so its answer copies its input: the case n-gram
// speculation is for, with real n-gram hits rather than planted ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_files.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda::cli {

/// `num_prompts` prompts of `input_len` token ids drawn uniformly from 1000..20000 (ordinary
/// tokens, no specials) with `seed`.
std::vector<std::vector<std::int32_t>> random_prompts(std::int64_t num_prompts,
                                                      std::int64_t input_len, std::uint64_t seed);

/// `num_prompts` chat prompts, each asking the model to repeat one of a few built-in passages
/// (cycled from `seed`), rendered with the chat template of `tokenizer_files` and tokenized
/// with `tokenizer`. NOT_FOUND / INVALID_ARGUMENT when there is no usable chat template.
StatusOr<std::vector<std::vector<std::int32_t>>> grounded_prompts(const ModelFiles& tokenizer_files,
                                                                  const Tokenizer& tokenizer,
                                                                  std::int64_t num_prompts,
                                                                  std::uint64_t seed);

}  // namespace pagoda::cli
