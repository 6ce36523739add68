// Verifies one request's drafted tokens against the target model's logits with the standard
// speculative-sampling rule (Leviathan et al. 2023; Chen et al. 2023), so the accepted tokens
// follow exactly the distribution the request's sampler would draw from without speculation:
//
//   row j of the target logits scores the token after draft j - 1 (row 0: after the last known
//   token). With p_j = the request's sampler chain applied to row j (penalties and min_tokens
//   seeing the history as of position j), and q_j the draft's distribution:
//
//     draft d_j accepted with probability min(1, p_j(d_j) / q_j(d_j));
//     on the first rejection: one token from normalize(max(0, p_j - q_j)), then stop;
//     all k accepted: one bonus token drawn from p_k.
//
//   A deterministic proposer (n-gram) has q_j = point mass on d_j: accept with p_j(d_j), else draw
//   from p_j without d_j, renormalized. Greedy (p_j a point mass on the argmax) reduces to
//   "accept while d_j is the argmax, then emit the argmax", with no random draws.
//
// The acceptance tests and residual draws use this object's own generator (seeded from the
// request's seed), so seeded requests stay reproducible; they need not reproduce the tokens of a
// non-speculative run with the same seed, only its distribution.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "pagoda/sampling_params.h"
#include "sampling/sampler.h"

namespace pagoda::sampling {

/// One request's verifier; not thread-safe.
class RejectionSampler {
 public:
  /// A verifier for a request with `params` (validated): its generator is seeded from
  /// params.seed (on a stream apart from the Sampler's) or from the random device.
  explicit RejectionSampler(const SamplingParams& params);

  /// Verifies `draft_token_ids` (k >= 0) against `target_logits` ([k + 1, vocab], row-major)
  /// through `sampler`'s chain. `draft_probs` is [k, vocab] (the draft model's q) or empty (a
  /// deterministic proposer). Returns the accepted drafts followed by exactly one more token
  /// (the replacement of the first rejected draft, or the bonus), and tells `sampler` about
  /// each returned token in order, as the non-speculative path would.
  std::vector<std::int32_t> verify(Sampler& sampler, std::span<const float> target_logits,
                                   std::span<const std::int32_t> draft_token_ids,
                                   std::span<const float> draft_probs);

 private:
  // u in [0, 1) from the top 53 bits of one generator output.
  double uniform();
  // One token from the current candidates with the draft's mass at this position taken out.
  std::int32_t draw_residual(const Candidates& candidates, std::int32_t draft_token,
                             std::span<const float> draft_probs);

  std::mt19937_64 rng_;
  std::vector<double> weights_;  // scratch, [num candidates]
};

}  // namespace pagoda::sampling
