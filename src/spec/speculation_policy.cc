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

SpeculationPolicy::RequestState& SpeculationPolicy::state(std::int32_t slot) {
  PAGODA_CHECK(slot >= 0) << "bad slot " << slot;
  if (static_cast<std::size_t>(slot) >= states_.size()) states_.resize(slot + 1);
  return states_[static_cast<std::size_t>(slot)];
}

std::int64_t SpeculationPolicy::num_tokens_to_draft(std::int32_t slot) {
  RequestState& s = state(slot);
  if (s.acceptance < min_acceptance_rate_) {
    if (++s.steps_off < reprobe_interval_) return 0;
    s.steps_off = 0;
    return num_speculative_tokens_;
  }
  const auto scaled = static_cast<std::int64_t>(
      std::ceil(s.acceptance * static_cast<double>(num_speculative_tokens_)));
  return std::clamp<std::int64_t>(scaled, 1, num_speculative_tokens_);
}

void SpeculationPolicy::record(std::int32_t slot, std::int64_t num_proposed,
                               std::int64_t num_accepted) {
  PAGODA_CHECK(num_proposed > 0 && num_accepted >= 0 && num_accepted <= num_proposed)
      << "slot " << slot << ": " << num_accepted << " of " << num_proposed << " accepted";
  RequestState& s = state(slot);
  const double rate = static_cast<double>(num_accepted) / static_cast<double>(num_proposed);
  s.acceptance = (1.0 - kEmaWeight) * s.acceptance + kEmaWeight * rate;
}

void SpeculationPolicy::remove(std::int32_t slot) {
  if (slot >= 0 && static_cast<std::size_t>(slot) < states_.size()) {
    states_[static_cast<std::size_t>(slot)] = RequestState{};
  }
}

double SpeculationPolicy::acceptance_rate(std::int32_t slot) const {
  return slot >= 0 && static_cast<std::size_t>(slot) < states_.size()
             ? states_[static_cast<std::size_t>(slot)].acceptance
             : 1.0;
}

}  // namespace pagoda::spec
