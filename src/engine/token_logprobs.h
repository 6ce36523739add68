// Log-probabilities of one sampled token, as the sampler computes them (log-softmax of the
// logits the model produced, before temperature and truncation, as vLLM's default
// "raw_logprobs") and output processing passes them on to the client.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda::engine {

/// The sampled token's logprob and the request's top-N alternatives at that position.
struct TokenLogprobs {
  /// The sampled token.
  std::int32_t token_id = 0;
  /// Its log-probability.
  float logprob = 0.0F;
  /// The N most likely tokens as (token id, logprob), most likely first; N is the request's
  /// `logprobs` option (may be 0). The sampled token appears here only if it is among them.
  std::vector<std::pair<std::int32_t, float>> top;
  /// 1 + the number of tokens strictly more likely (vLLM's rank); 0 where not computed.
  std::int64_t rank = 0;
};

}  // namespace pagoda::engine
