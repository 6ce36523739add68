#include "spec/speculation_policy.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace pagoda::spec {

SpeculationPolicy::SpeculationPolicy(const SpeculativeConfig& config)
    : num_speculative_tokens_(config.num_speculative_tokens),
      disable_by_batch_size_(config.disable_by_batch_size),
      min_acceptance_rate_(config.min_acceptance_rate),
      reprobe_interval_(config.reprobe_interval) {}

SpeculationPolicy::RequestState& SpeculationPolicy::state(std::string_view request_id) {
  auto it = states_.find(request_id);
  if (it == states_.end()) it = states_.emplace(std::string(request_id), RequestState{}).first;
  return it->second;
}

std::int64_t SpeculationPolicy::num_tokens_to_draft(std::string_view request_id) {
  RequestState& s = state(request_id);
  if (s.acceptance < min_acceptance_rate_) {
    if (++s.steps_off < reprobe_interval_) return 0;
    s.steps_off = 0;
    return num_speculative_tokens_;
  }
  const auto scaled = static_cast<std::int64_t>(
      std::ceil(s.acceptance * static_cast<double>(num_speculative_tokens_)));
  return std::clamp<std::int64_t>(scaled, 1, num_speculative_tokens_);
}

void SpeculationPolicy::record(std::string_view request_id, std::int64_t num_proposed,
                               std::int64_t num_accepted) {
  PAGODA_CHECK(num_proposed > 0 && num_accepted >= 0 && num_accepted <= num_proposed)
      << request_id << ": " << num_accepted << " of " << num_proposed << " accepted";
  RequestState& s = state(request_id);
  const double rate = static_cast<double>(num_accepted) / static_cast<double>(num_proposed);
  s.acceptance = (1.0 - kEmaWeight) * s.acceptance + kEmaWeight * rate;
}

void SpeculationPolicy::remove(std::string_view request_id) {
  if (const auto it = states_.find(request_id); it != states_.end()) states_.erase(it);
}

double SpeculationPolicy::acceptance_rate(std::string_view request_id) const {
  const auto it = states_.find(request_id);
  return it == states_.end() ? 1.0 : it->second.acceptance;
}

}  // namespace pagoda::spec
