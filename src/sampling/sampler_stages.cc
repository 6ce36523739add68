#include "sampling/sampler_stages.h"

#include <algorithm>
#include <cmath>

namespace pagoda::sampling {

void TemperatureStage::apply(Candidates& candidates) {
  for (Candidate& c : candidates.entries) c.logit /= temperature_;
}

void TopKStage::apply(Candidates& candidates) {
  candidates.keep_top(static_cast<std::size_t>(k_));
}

void TopPStage::apply(Candidates& candidates) {
  candidates.sort();
  auto& entries = candidates.entries;
  const double max_logit = entries.front().logit;
  double total = 0.0;
  for (const Candidate& c : entries) total += std::exp(double{c.logit} - max_logit);
  // Walk down the sorted list until the mass before the current token reaches p.
  const double threshold = p_ * total;
  double mass_before = 0.0;
  std::size_t keep = 0;
  while (keep < entries.size() && mass_before < threshold) {
    mass_before += std::exp(double{entries[keep].logit} - max_logit);
    ++keep;
  }
  entries.resize(std::max<std::size_t>(keep, 1));
}

void MinPStage::apply(Candidates& candidates) {
  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p).
  const double cutoff = double{candidates.max_logit()} + std::log(min_p_);
  std::erase_if(candidates.entries, [cutoff](const Candidate& c) { return c.logit < cutoff; });
}

}  // namespace pagoda::sampling
