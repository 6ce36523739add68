// Budget accounting for one scheduling step: tokens (max_num_batched_tokens) and sequences
// (max_num_seqs). Every grant goes through here, so the totals in a SchedulerOutput cannot
// exceed the limits the executor was sized for.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/check.h"

namespace pagoda::engine {

/// What is left of one step's token budget.
class TokenBudget {
 public:
  /// A fresh budget of `max_tokens` tokens; `long_prefill_threshold` > 0 caps any one grant.
  TokenBudget(std::int64_t max_tokens, std::int64_t long_prefill_threshold)
      : remaining_(max_tokens), long_prefill_threshold_(long_prefill_threshold) {}

  /// Tokens still available.
  std::int64_t remaining() const { return remaining_; }
  /// Whether anything is left.
  bool exhausted() const { return remaining_ <= 0; }

  /// How many of `wanted` tokens one request may get now: capped by the long-prefill threshold
  /// (so one long prompt cannot starve the others) and by what is left.
  std::int64_t grant(std::int64_t wanted) const {
    if (long_prefill_threshold_ > 0) wanted = std::min(wanted, long_prefill_threshold_);
    return std::min(wanted, remaining_);
  }
  /// Spends `n` granted tokens.
  void consume(std::int64_t n) {
    PAGODA_CHECK(n >= 0 && n <= remaining_) << "spending " << n << " of " << remaining_;
    remaining_ -= n;
  }

 private:
  std::int64_t remaining_;
  std::int64_t long_prefill_threshold_;
};

}  // namespace pagoda::engine
