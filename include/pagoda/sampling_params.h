// How one request picks its next token from the logits. Field names and defaults follow vLLM's
// SamplingParams, so clients moving over keep their numbers.
#pragma once

#include <cstdint>
#include <optional>

#include "pagoda/status.h"

namespace pagoda {

/// Per-request sampling settings. Stages run in the order HF transformers applies its warpers:
/// temperature, top_k, top_p, min_p, then a draw from what is left.
struct SamplingParams {
  /// Logits are divided by this; 0 means greedy (argmax).
  double temperature = 1.0;
  /// Keep the k most likely tokens; 0 (or -1, as vLLM spells it) keeps all.
  std::int64_t top_k = 0;
  /// Keep the smallest set of most likely tokens whose probability reaches top_p; 1 keeps all.
  double top_p = 1.0;
  /// Drop tokens less likely than min_p times the most likely one; 0 keeps all.
  double min_p = 0.0;
  /// Seeds this request's own generator, so its tokens do not depend on what it is batched with;
  /// unset means a fresh random seed.
  std::optional<std::uint64_t> seed;

  /// INVALID_ARGUMENT naming the field when a value is out of range.
  Status validate() const;
  /// Whether sampling reduces to argmax.
  bool is_greedy() const { return temperature == 0.0 || top_k == 1; }
};

}  // namespace pagoda
