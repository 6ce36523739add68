// Log-probabilities returned to clients, computed as vLLM's default logprobs_mode
// "raw_logprobs" does: log_softmax of the model's raw logits, before penalties, bias or
// temperature, so they describe the model rather than the sampling settings.
#pragma once

#include <cstdint>
#include <span>

#include "pagoda/step_sampling.h"

namespace pagoda::sampling {

/// The sampled token's log-probability, rank and alternatives: the executor interface's struct.
using SampledLogprobs = pagoda::SampledLogprobs;

/// Fills `out` for `token_id` and the `num_top` best tokens of log_softmax(`logits`). Paid per
/// generated token that asks for logprobs, so it runs vectorized (AVX2) where the CPU allows:
/// exp in fp32, the normalizer summed in double; within ~1e-6 of the reference.
void compute_logprobs(std::span<const float> logits /* [vocab] */, std::int32_t token_id,
                      std::int64_t num_top, SampledLogprobs& out);

/// The scalar oracle of compute_logprobs: exp and the normalizer in double. Same rank and top
/// ids; logprobs within the fast path's rounding.
void compute_logprobs_reference(std::span<const float> logits /* [vocab] */, std::int32_t token_id,
                                std::int64_t num_top, SampledLogprobs& out);

}  // namespace pagoda::sampling
