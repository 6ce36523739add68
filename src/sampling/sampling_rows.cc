#include "sampling/sampling_rows.h"

#include <algorithm>
#include <string>

namespace pagoda {

namespace {

Status check_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size, const char* what) {
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument(std::string(what) + " token " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  return Status::ok_status();
}

}  // namespace

Status SlotSamplingConfig::validate(std::int64_t vocab_size) const {
  std::vector<std::int32_t> bias_ids;
  for (const auto& [id, bias] : logit_bias) bias_ids.push_back(id);
  PAGODA_RETURN_IF_ERROR(check_ids(bias_ids, vocab_size, "logit_bias"));
  PAGODA_RETURN_IF_ERROR(check_ids(min_tokens_banned_ids, vocab_size, "min_tokens"));
  PAGODA_RETURN_IF_ERROR(check_ids(prompt_token_ids, vocab_size, "prompt"));
  std::sort(bias_ids.begin(), bias_ids.end());
  if (std::adjacent_find(bias_ids.begin(), bias_ids.end()) != bias_ids.end()) {
    return invalid_argument("logit_bias lists a token twice");
  }
  return Status::ok_status();
}

}  // namespace pagoda

namespace pagoda::sampling {

SlotSamplingConfig slot_sampling_config(const SamplingParams& params,
                                        std::span<const std::int32_t> prompt_token_ids,
                                        std::span<const std::int32_t> stop_token_ids) {
  SlotSamplingConfig config;
  config.presence_penalty = static_cast<float>(params.presence_penalty);
  config.frequency_penalty = static_cast<float>(params.frequency_penalty);
  config.repetition_penalty = static_cast<float>(params.repetition_penalty);
  for (const auto& [id, bias] : params.logit_bias) {
    config.logit_bias.emplace_back(id, static_cast<float>(bias));  // std::map: ascending ids
  }
  config.min_tokens = params.min_tokens;
  if (params.min_tokens > 0) {
    config.min_tokens_banned_ids.assign(stop_token_ids.begin(), stop_token_ids.end());
  }
  if (params.repetition_penalty != 1.0) {
    config.prompt_token_ids.assign(prompt_token_ids.begin(), prompt_token_ids.end());
  }
  return config;
}

SamplingRow sampling_row(const SamplingParams& params, std::int32_t slot, std::uint64_t seed,
                         std::int32_t num_logprobs) {
  return SamplingRow{
      .slot = slot,
      .temperature = params.is_greedy() ? 0.0f : static_cast<float>(params.temperature),
      // top_k <= 0 is off; past the vocabulary it keeps everything either way.
      .top_k = static_cast<std::int32_t>(std::clamp<std::int64_t>(params.top_k, 0, 1 << 30)),
      .top_p = static_cast<float>(params.top_p),
      .min_p = static_cast<float>(params.min_p),
      .seed = params.seed.value_or(seed),
      .num_logprobs = num_logprobs};
}

}  // namespace pagoda::sampling
