// The stateless stages of the chain, in the order a Sampler runs them (HF's warper order).
#pragma once

#include <cstdint>

#include "sampling/sampler_stage.h"

namespace pagoda::sampling {

/// logit /= temperature (temperature > 0).
class TemperatureStage final : public SamplerStage {
 public:
  explicit TemperatureStage(float temperature) : temperature_(temperature) {}
  void apply(Candidates& candidates) override;

 private:
  float temperature_;
};

/// Keeps the k highest logits (k >= 1).
class TopKStage final : public SamplerStage {
 public:
  explicit TopKStage(std::int64_t k) : k_(k) {}
  void apply(Candidates& candidates) override;

 private:
  std::int64_t k_;
};

/// Keeps the most likely tokens until their probability mass reaches p (0 < p < 1); a token is
/// kept when the mass strictly before it is below p, so at least one always stays.
class TopPStage final : public SamplerStage {
 public:
  explicit TopPStage(double p) : p_(p) {}
  void apply(Candidates& candidates) override;

 private:
  double p_;
};

/// Keeps tokens with probability >= min_p * (the top probability) (0 < min_p <= 1).
class MinPStage final : public SamplerStage {
 public:
  explicit MinPStage(double min_p) : min_p_(min_p) {}
  void apply(Candidates& candidates) override;

 private:
  double min_p_;
};

}  // namespace pagoda::sampling
