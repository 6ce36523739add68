// The prompts of `pagoda bench offline`: random tokens (raw throughput), or a grounded task
// (the model asked to repeat a given passage, so its answer copies its input: the case n-gram
// speculation is for, with real n-gram hits rather than planted ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::cli {

/// `num_prompts` prompts of `input_len` token ids drawn uniformly from 1000..20000 (ordinary
/// tokens, no specials) with `seed`.
std::vector<std::vector<std::int32_t>> random_prompts(std::int64_t num_prompts,
                                                      std::int64_t input_len, std::uint64_t seed);

/// `num_prompts` chat prompts for the model at `model_path`, each asking it to repeat one of a
/// few built-in passages (cycled from `seed`), rendered with the model's chat template and
/// tokenized. NOT_FOUND / INVALID_ARGUMENT when the model has no tokenizer or chat template.
StatusOr<std::vector<std::vector<std::int32_t>>> grounded_prompts(const std::string& model_path,
                                                                  std::int64_t num_prompts,
                                                                  std::uint64_t seed);

}  // namespace pagoda::cli
