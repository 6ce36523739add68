// One request's sampler chain on the host: stages built from its SamplingParams (logits
// processors on the raw logits, then warpers), then a draw from the request's own seeded
// generator. Speculative verification (rejection_sampler.h) runs it over the raw logits rows of
// a request with drafts, since it needs the whole kept distribution at each position; every other
// token is sampled beside the logits by the executor (pagoda/step_sampling.h, HostSampler on the
// CPU), under the same rules.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "pagoda/sampling_params.h"
#include "sampling/candidates.h"
#include "sampling/sampler_stage.h"

namespace pagoda::sampling {

/// The index of the largest logit; the lowest index on ties (as torch.argmax).
std::int32_t argmax(std::span<const float> logits /* [vocab] */);

/// One request's sampler. Holds its generator and scratch, so a step allocates nothing after
/// the first; not thread-safe (one per request).
class Sampler {
 public:
  /// A sampler for `params`, which must have passed validate(). The repetition penalty sees
  /// `prompt_token_ids`; min_tokens bans `stop_token_ids` (EOS included) until it is reached.
  explicit Sampler(const SamplingParams& params,
                   std::span<const std::int32_t> prompt_token_ids = {},
                   std::vector<std::int32_t> stop_token_ids = {});

  /// The next token for `logits`.
  std::int32_t sample(std::span<const float> logits /* [vocab] */);

  /// Tells the stateful stages which token the request took.
  void accept(std::int32_t token);

  /// The tokens sample() could return for `logits`, after every stage (for tests and logprobs).
  const Candidates& candidates_for(std::span<const float> logits /* [vocab] */);

 private:
  void run_stages(std::span<const float> logits);
  std::int32_t draw();

  bool greedy_;
  // Stages over the whole vocabulary by id (min_tokens, bias, penalties), then the warpers.
  std::vector<std::unique_ptr<SamplerStage>> processors_;
  std::vector<std::unique_ptr<SamplerStage>> stages_;
  std::mt19937_64 rng_;
  Candidates candidates_;
};

}  // namespace pagoda::sampling
