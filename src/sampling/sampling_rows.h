// From a request's SamplingParams to what the executor's sampler takes
// (pagoda/step_sampling.h): the slot's lifelong settings and the row template each step copies.
// The engine and `pagoda generate` both go through here, so a seed gives the same tokens in both.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagoda/sampling_params.h"
#include "pagoda/step_sampling.h"

namespace pagoda::sampling {

/// Penalties, bias and min_tokens of `params` (validated); `stop_token_ids` (EOS included unless
/// ignore_eos) are banned until min_tokens, `prompt_token_ids` feed the repetition penalty.
SlotSamplingConfig slot_sampling_config(const SamplingParams& params,
                                        std::span<const std::int32_t> prompt_token_ids,
                                        std::span<const std::int32_t> stop_token_ids);

/// The row of `params` at `slot`, drawing with `seed` (params.seed when set, the caller's
/// otherwise); `num_logprobs` -1 asks for none. Position 0, nothing forced.
SamplingRow sampling_row(const SamplingParams& params, std::int32_t slot, std::uint64_t seed,
                         std::int32_t num_logprobs);

}  // namespace pagoda::sampling
