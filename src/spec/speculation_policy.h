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
// verifications move its EMA.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/string_map.h"
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
  /// Tokens `request_id` drafts this decode step (0: none); counts the step toward a re-probe.
  std::int64_t num_tokens_to_draft(std::string_view request_id);
  /// A verification of `request_id`: `num_accepted` of `num_proposed` (> 0) drafts accepted.
  void record(std::string_view request_id, std::int64_t num_proposed, std::int64_t num_accepted);
  /// Forgets a finished request; no-op for an unknown id.
  void remove(std::string_view request_id);
  /// The request's acceptance EMA (1 before its first verification).
  double acceptance_rate(std::string_view request_id) const;

 private:
  struct RequestState {
    double acceptance = 1.0;
    std::int64_t steps_off = 0;  // decode steps since drafting stopped or last probed
  };
  RequestState& state(std::string_view request_id);

  std::int64_t num_speculative_tokens_;
  std::int64_t disable_by_batch_size_;
  double min_acceptance_rate_;
  std::int64_t reprobe_interval_;
  StringMap<RequestState> states_;
};

}  // namespace pagoda::spec
