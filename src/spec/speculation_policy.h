// How many tokens each request drafts, so speculation only runs where it pays (issue 12, point 3):
//
//   batch rule     more than disable_by_batch_size requests decoding -> nobody drafts this step.
//                  A CPU decode step at a large batch is compute-bound, so verifying k + 1 tokens
//                  per request costs k + 1 times the compute while accepting fewer than k + 1.
//   request rule   acceptance EMA a (starts at 1, weight kEmaWeight per verification):
//                    a >= min_acceptance_rate   draft ceil(a * k) tokens (1 <= . <= k)
//                    a <  min_acceptance_rate   draft nothing, but every reprobe_interval-th
//                                               decode step draft k tokens to re-measure a
//
// A request whose proposer has nothing to offer (no n-gram match) is not counted: only
// verifications move its EMA. Requests are known by their slot (engine/slot_allocator.h); the
// engine's release of a slot calls remove(), so the slot's next request starts at a = 1.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/speculative_config.h"

namespace pagoda::spec {

/// Per-request acceptance tracking and the batch-size cutoff.
class SpeculationPolicy {
 public:
  /// Weight of the newest verification in the acceptance EMA.
  static constexpr double kEmaWeight = 0.25;

  /// Thresholds from a validated `config`.
  explicit SpeculationPolicy(const SpeculativeConfig& config);

  /// Whether requests may draft in a step with `num_decoding` requests decoding.
  bool allows_batch(std::int64_t num_decoding) const {
    return num_decoding <= disable_by_batch_size_;
  }
  /// Tokens the request at `slot` drafts this decode step (0: none); counts the step toward a
  /// re-probe.
  std::int64_t num_tokens_to_draft(std::int32_t slot);
  /// A verification at `slot`: `num_accepted` of `num_proposed` (> 0) drafts accepted.
  void record(std::int32_t slot, std::int64_t num_proposed, std::int64_t num_accepted);
  /// Forgets the request at `slot` (finished), so the slot's next request starts afresh.
  void remove(std::int32_t slot);
  /// The acceptance EMA at `slot` (1 before its request's first verification).
  double acceptance_rate(std::int32_t slot) const;

 private:
  struct RequestState {
    double acceptance = 1.0;
    std::int64_t steps_off = 0;  // decode steps since drafting stopped or last probed
  };
  RequestState& state(std::int32_t slot);

  std::int64_t num_speculative_tokens_;
  std::int64_t disable_by_batch_size_;
  double min_acceptance_rate_;
  std::int64_t reprobe_interval_;
  std::vector<RequestState> states_;  // by slot, grown on demand; a free slot's is the default
};

}  // namespace pagoda::spec
