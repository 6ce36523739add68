// How one request picks its next token from the logits. Field names and defaults follow vLLM's
// SamplingParams, so clients moving over keep their numbers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "pagoda/status.h"

namespace pagoda {

/// Per-request sampling settings. Logits processors run first, on the raw logits: min_tokens
/// (bans stop tokens), logit_bias, then the penalties (vLLM's order). Then the warpers in the
/// order HF transformers applies them: temperature, top_k, top_p, min_p, and a draw from what is
/// left.
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

  /// Subtracted once from the logit of every token already generated, in [-2, 2].
  double presence_penalty = 0.0;
  /// Subtracted from a token's logit once per time it was generated, in [-2, 2].
  double frequency_penalty = 0.0;
  /// Tokens seen in the prompt or the output: positive logits divided by it, negative ones
  /// multiplied (> 0; 1 is off).
  double repetition_penalty = 1.0;
  /// Added to the logit of each token id, in [-100, 100] (OpenAI's logit_bias).
  std::map<std::int32_t, double> logit_bias;
  /// EOS and stop_token_ids are banned (logit -inf) until this many tokens are generated.
  std::int64_t min_tokens = 0;
  /// Return the log-probabilities of this many most likely tokens beside the sampled one's own
  /// (log_softmax of the raw model logits, vLLM's default "raw_logprobs"); unset returns none.
  std::optional<std::int64_t> logprobs;
  /// Logprobs of every prompt token after the first, with this many alternatives each (vLLM's
  /// prompt_logprobs); unset computes none. Same range as logprobs.
  std::optional<std::int64_t> prompt_logprobs;
  /// Independent samples of the same prompt; the engine runs n requests sharing its prefix.
  std::int64_t n = 1;

  /// Most top logprobs a request may ask for (vLLM's default max_logprobs).
  static constexpr std::int64_t kMaxLogprobs = 20;
  /// Most samples per prompt.
  static constexpr std::int64_t kMaxN = 128;

  /// INVALID_ARGUMENT naming the field when a value is out of range; logit_bias ids are checked
  /// against `vocab_size` when it is known (> 0).
  Status validate(std::int64_t vocab_size = 0) const;
  /// Whether sampling reduces to argmax (of the processed logits).
  bool is_greedy() const { return temperature == 0.0 || top_k == 1; }
  /// Whether any logits processor (min_tokens, bias, penalties) changes the raw logits.
  bool has_logits_processors() const {
    return min_tokens > 0 || !logit_bias.empty() || presence_penalty != 0.0 ||
           frequency_penalty != 0.0 || repetition_penalty != 1.0;
  }
};

}  // namespace pagoda
