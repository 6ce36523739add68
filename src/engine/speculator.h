// Speculative decoding on the engine loop: before a step, decoding requests draft tokens (a
// Proposer, as the SpeculationPolicy allows); the scheduler runs the drafts behind each last
// token; after the forward pass the RejectionSampler keeps the accepted prefix plus one token of
// the target's own. One step of one request, k = 3:
//
//   propose    tokens ... t      drafts d1 d2 d3               (policy: k for this request)
//   schedule   run t d1 d2 d3    4 logits rows                 (scheduler.h: budget, blocks)
//   verify     rows 0..3 -> d1 accepted, d2 rejected -> [d1, x] (rejection_sampler.h)
//   update     append d1 x; num_computed_tokens rolls back past d2 d3
//
// Requests that cannot combine with speculation exactly are never drafted for: those with
// logprobs (client- or trace-requested: the values come from one row per token) and those with
// a reasoning budget (the engine forces the end tag's tokens).
//
// Requests are known by their slot (slot_allocator.h): the verifier's state here, the policy's
// acceptance EMA and the proposer's state all sit at it, and remove() (called from
// EngineCore::release_slot) clears all three, so a reused slot starts clean.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/scheduler_output.h"
#include "pagoda/model_executor.h"
#include "pagoda/sampling_params.h"
#include "pagoda/status.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"
#include "spec/proposer.h"
#include "spec/speculation_policy.h"
#include "spec/speculative_config.h"

namespace pagoda::engine {

/// Counters for /metrics (vLLM's spec_decode_* names).
struct SpecDecodeStats {
  std::int64_t num_drafts = 0;           ///< Verifications (requests-steps with drafts).
  std::int64_t num_draft_tokens = 0;     ///< Drafted tokens verified.
  std::int64_t num_accepted_tokens = 0;  ///< Of those, accepted.
  /// [num_speculative_tokens]: accepted drafts at each draft position.
  std::vector<std::int64_t> num_accepted_tokens_per_pos;
};

/// Proposing, verifying and counting; owned by the engine loop.
class Speculator {
 public:
  /// A speculator for a validated `config`. draft_model needs `draft_executor` (its KV cache is
  /// allocated here: `draft_num_blocks` blocks of `block_size`, in KV groups when the draft has
  /// sliding-window layers unless `single_kv_table`), whose vocabulary must match
  /// `target_vocab_size`; INVALID_ARGUMENT otherwise.
  static StatusOr<std::unique_ptr<Speculator>> create(const spec::SpeculativeConfig& config,
                                                      std::shared_ptr<ModelExecutor> draft_executor,
                                                      std::int64_t target_vocab_size,
                                                      std::int64_t block_size,
                                                      std::int64_t draft_num_blocks,
                                                      bool single_kv_table = false);

  /// Drafts for the request at `slot` (free here) from now on (its sampling settings allow
  /// exact verification); its verifier's chain sees `prompt_token_ids` (repetition) and bans
  /// `stop_token_ids` until min_tokens.
  void add(std::int32_t slot, const SamplingParams& params,
           std::span<const std::int32_t> prompt_token_ids,
           std::vector<std::int32_t> stop_token_ids);
  /// Forgets the request at `slot` here, in the policy and in the proposer; no-op when the slot
  /// holds none.
  void remove(std::int32_t slot);
  /// Whether the request at `slot` drafts.
  bool contains(std::int32_t slot) const;

  /// Sets the drafts of every request that decodes next step and may draft now.
  void propose(Scheduler& scheduler);
  /// Verifies `scheduled`'s drafts against its raw logits rows ([1 + num_spec_tokens, vocab])
  /// through the request's own sampler chain; returns the accepted drafts plus one token and
  /// counts them.
  std::vector<std::int32_t> verify(const ScheduledRequest& scheduled,
                                   std::span<const float> logits);
  /// A token the executor sampled for the request at `slot` in a step without drafts, so its
  /// verifier's penalties and min_tokens see the whole output.
  void accept(std::int32_t slot, std::int32_t token);

  /// Counters since construction.
  const SpecDecodeStats& stats() const { return stats_; }
  /// The policy (tests read its acceptance EMAs).
  const spec::SpeculationPolicy& policy() const { return policy_; }
  /// The proposer (tests read its state).
  const spec::Proposer& proposer() const { return *proposer_; }

 private:
  struct RequestState {
    SamplingParams sampling;
    sampling::Sampler sampler;
    sampling::RejectionSampler verifier;
    std::vector<float> draft_probs;  // [drafts, vocab] of the pending drafts, or empty
  };
  Speculator(const spec::SpeculativeConfig& config, std::unique_ptr<spec::Proposer> proposer);
  RequestState* find(std::int32_t slot);

  spec::SpeculativeConfig config_;
  std::unique_ptr<spec::Proposer> proposer_;
  spec::SpeculationPolicy policy_;
  std::vector<std::optional<RequestState>> requests_;  // by slot, grown on demand
  std::int32_t num_requests_ = 0;
  SpecDecodeStats stats_;
  // Scratch of propose(), reused between steps: the drafting requests and their proposals.
  std::vector<spec::ProposalRequest> batch_;
  std::vector<const Request*> batch_requests_;
  std::vector<spec::Proposal> proposals_;
};

}  // namespace pagoda::engine
