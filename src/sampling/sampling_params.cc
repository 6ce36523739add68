#include "pagoda/sampling_params.h"

#include <cmath>
#include <string>

namespace pagoda {

namespace {

bool in_range(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

}  // namespace

Status SamplingParams::validate(std::int64_t vocab_size) const {
  if (!(temperature >= 0.0) || !std::isfinite(temperature)) {
    return invalid_argument("temperature must be a finite number >= 0, got " +
                            std::to_string(temperature));
  }
  if (top_k < -1) return invalid_argument("top_k must be -1, 0 (all tokens) or positive");
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    return invalid_argument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (!(min_p >= 0.0 && min_p <= 1.0)) {
    return invalid_argument("min_p must be in [0, 1], got " + std::to_string(min_p));
  }
  if (!in_range(presence_penalty, -2.0, 2.0)) {
    return invalid_argument("presence_penalty must be in [-2, 2], got " +
                            std::to_string(presence_penalty));
  }
  if (!in_range(frequency_penalty, -2.0, 2.0)) {
    return invalid_argument("frequency_penalty must be in [-2, 2], got " +
                            std::to_string(frequency_penalty));
  }
  if (!(repetition_penalty > 0.0) || !std::isfinite(repetition_penalty)) {
    return invalid_argument("repetition_penalty must be a finite number > 0, got " +
                            std::to_string(repetition_penalty));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
      return invalid_argument("logit_bias names token id " + std::to_string(id) +
                              ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    if (!in_range(bias, -100.0, 100.0)) {
      return invalid_argument("logit_bias for token " + std::to_string(id) +
                              " must be in [-100, 100], got " + std::to_string(bias));
    }
  }
  if (min_tokens < 0) {
    return invalid_argument("min_tokens must be >= 0, got " + std::to_string(min_tokens));
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return invalid_argument("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                            std::to_string(*logprobs));
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return invalid_argument("prompt_logprobs must be in [0, " + std::to_string(kMaxLogprobs) +
                            "], got " + std::to_string(*prompt_logprobs));
  }
  if (n < 1 || n > kMaxN) {
    return invalid_argument("n must be in [1, " + std::to_string(kMaxN) + "], got " +
                            std::to_string(n));
  }
  return Status::ok_status();
}

}  // namespace pagoda
