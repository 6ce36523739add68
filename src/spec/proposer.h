// What every speculative proposer does: for a batch of decoding requests, guess up to k next
// tokens each. The engine's Speculator (src/engine/speculator.h) decides who drafts and how many;
// the verifier (src/sampling/rejection_sampler.h) needs the draft's probabilities q when the
// proposer drew its tokens at random.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "pagoda/sampling_params.h"

namespace pagoda::spec {

/// One request that may draft this step.
struct ProposalRequest {
  std::string_view request_id;
  std::span<const std::int32_t> token_ids;   ///< Prompt + output so far.
  std::int64_t max_tokens = 0;               ///< Draft at most this many (>= 1).
  const SamplingParams* sampling = nullptr;  ///< The request's settings (never null).
};

/// One request's draft.
struct Proposal {
  std::vector<std::int32_t> token_ids;  ///< Empty: nothing to propose.
  /// [token_ids.size(), vocab] distributions the tokens were drawn from; empty when the
  /// proposer is deterministic (n-gram, or a draft model under greedy sampling).
  std::vector<float> probs;
};

/// A source of drafts; single-threaded (the engine loop).
class Proposer {
 public:
  virtual ~Proposer() = default;
  /// Fills proposals[i] for requests[i] (proposals is resized to match).
  virtual void propose(std::span<const ProposalRequest> requests,
                       std::vector<Proposal>& proposals) = 0;
  /// Forgets a request's state (finished, aborted); no-op for an unknown id.
  virtual void remove(std::string_view request_id) {}
};

}  // namespace pagoda::spec
