// Log-probabilities returned to clients, computed as vLLM's default logprobs_mode
// "raw_logprobs" does: log_softmax of the model's raw logits, before penalties, bias or
// temperature, so they describe the model rather than the sampling settings.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pagoda::sampling {

/// The sampled token's log-probability and rank, and the most likely alternatives.
struct SampledLogprobs {
  std::int32_t token_id = 0;
  float logprob = 0.0f;
  /// 1 + the number of tokens strictly more likely (vLLM's rank).
  std::int64_t rank = 0;
  /// The `num_top` most likely tokens, descending (ties by ascending id).
  std::vector<std::pair<std::int32_t, float>> top;
};

/// Fills `out` for `token_id` and the `num_top` best tokens of log_softmax(`logits`). Paid per
/// generated token on the engine thread, so it runs vectorized (AVX2) where the CPU allows:
/// exp in fp32, the normalizer summed in double; within ~1e-6 of the reference.
void compute_logprobs(std::span<const float> logits /* [vocab] */, std::int32_t token_id,
                      std::int64_t num_top, SampledLogprobs& out);

/// The scalar oracle of compute_logprobs: exp and the normalizer in double. Same rank and top
/// ids; logprobs within the fast path's rounding.
void compute_logprobs_reference(std::span<const float> logits /* [vocab] */, std::int32_t token_id,
                                std::int64_t num_top, SampledLogprobs& out);

}  // namespace pagoda::sampling
