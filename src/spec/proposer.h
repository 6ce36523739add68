// What every speculative proposer does: for a batch of decoding requests, guess up to k next
// tokens each. The engine's Speculator (src/engine/speculator.h) decides who drafts and how many;
// the verifier (src/sampling/rejection_sampler.h) needs the draft's probabilities q when the
// proposer drew its tokens at random. A stateful proposer keeps its per-request state by the
// request's slot (engine/slot_allocator.h), which the engine frees with remove().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagoda/sampling_params.h"

namespace pagoda::spec {

/// One request that may draft this step.
struct ProposalRequest {
  std::int32_t slot = -1;                    ///< The request's slot: a stateful proposer's key.
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
  /// Forgets the state of the request at `slot` (finished, aborted), so the slot's next request
  /// starts clean; no-op when it holds none.
  virtual void remove(std::int32_t slot) {}
};

}  // namespace pagoda::spec
