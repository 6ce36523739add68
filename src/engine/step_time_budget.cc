#include "engine/step_time_budget.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {

StepTimeBudget::StepTimeBudget(double target_seconds, std::int64_t min_tokens,
                               std::int64_t max_tokens)
    : target_(target_seconds),
      min_tokens_(std::max<std::int64_t>(1, min_tokens)),
      max_tokens_(std::max(max_tokens, std::max<std::int64_t>(1, min_tokens))),
      budget_(std::clamp(kProbeTokens, min_tokens_, max_tokens_)) {}

void StepTimeBudget::observe(std::int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0.0) || !std::isfinite(seconds)) return;
  const auto n = static_cast<double>(tokens);
  s0_ = kDecay * s0_ + 1.0;
  sn_ = kDecay * sn_ + n;
  st_ = kDecay * st_ + seconds;
  snn_ = kDecay * snn_ + n * n;
  snt_ = kDecay * snt_ + n * seconds;
  refit();
}

void StepTimeBudget::refit() {
  const double spread = s0_ * snn_ - sn_ * sn_;  // s0^2 x the weighted variance of n
  double per_token = 0.0;
  double per_step = 0.0;
  // Steps of (nearly) one size say nothing about the slope: charge the whole time per token,
  // which overestimates the cost and so errs towards short steps.
  if (spread > 1e-6 * s0_ * snn_) {
    per_token = (s0_ * snt_ - sn_ * st_) / spread;
    per_step = (st_ - per_token * sn_) / s0_;
  }
  if (!(per_token > 0.0)) {
    per_token = st_ / sn_;
    per_step = 0.0;
  }
  per_step = std::max(per_step, 0.0);
  const double room = target_ - per_step;
  const double tokens = room > 0.0 ? room / per_token : 0.0;
  budget_ = tokens >= static_cast<double>(max_tokens_)
                ? max_tokens_
                : std::clamp(static_cast<std::int64_t>(tokens), min_tokens_, max_tokens_);
}

std::int64_t StepTimeBudget::budget(std::int64_t num_running) const {
  const std::int64_t floor = std::min(max_tokens_, kTokensPerRunning * num_running);
  return std::max(budget_, floor);
}

}  // namespace pagoda::engine
