#include "sampling/logits_processors.h"

#include <algorithm>
#include <limits>

#include "common/check.h"

namespace pagoda::sampling {

namespace {

// Logits processors index entries by token id; a stage that sorted or dropped entries before
// them would silently hit the wrong tokens.
Candidate& at(Candidates& candidates, std::int32_t id) {
  PAGODA_CHECK(!candidates.sorted && id >= 0 &&
               static_cast<std::size_t>(id) < candidates.entries.size())
      << "logits processor after a warper, or token " << id << " outside the vocabulary";
  return candidates.entries[static_cast<std::size_t>(id)];
}

}  // namespace

void MinTokensStage::apply(Candidates& candidates) {
  if (num_generated_ >= min_tokens_) return;
  for (const std::int32_t id : stop_token_ids_) {
    if (static_cast<std::size_t>(id) < candidates.entries.size()) {
      at(candidates, id).logit = -std::numeric_limits<float>::infinity();
    }
  }
}

LogitBiasStage::LogitBiasStage(const std::map<std::int32_t, double>& bias) {
  for (const auto& [id, b] : bias) bias_.emplace_back(id, static_cast<float>(b));
}

void LogitBiasStage::apply(Candidates& candidates) {
  for (const auto& [id, b] : bias_) at(candidates, id).logit += b;
}

PenaltyStage::PenaltyStage(double presence, double frequency, double repetition,
                           std::span<const std::int32_t> prompt_token_ids)
    : presence_(static_cast<float>(presence)),
      frequency_(static_cast<float>(frequency)),
      repetition_(static_cast<float>(repetition)) {
  if (repetition_ == 1.0f) return;  // the prompt only matters to the repetition penalty
  prompt_only_ids_.assign(prompt_token_ids.begin(), prompt_token_ids.end());
  std::sort(prompt_only_ids_.begin(), prompt_only_ids_.end());
  prompt_only_ids_.erase(std::unique(prompt_only_ids_.begin(), prompt_only_ids_.end()),
                         prompt_only_ids_.end());
}

void PenaltyStage::apply(Candidates& candidates) {
  const auto repeat = [this](float logit) {
    return logit > 0.0f ? logit / repetition_ : logit * repetition_;
  };
  if (repetition_ != 1.0f) {
    for (const std::int32_t id : prompt_only_ids_) {
      if (output_counts_.contains(id)) continue;  // penalized once, below
      Candidate& c = at(candidates, id);
      c.logit = repeat(c.logit);
    }
  }
  for (const auto& [id, count] : output_counts_) {
    Candidate& c = at(candidates, id);
    c.logit = repeat(c.logit) - frequency_ * static_cast<float>(count) - presence_;
  }
}

void PenaltyStage::accept(std::int32_t token) {
  ++output_counts_[token];
}

}  // namespace pagoda::sampling
