#include "sampling/sampler.h"

#include <cmath>

#include "common/check.h"
#include "sampling/sampler_stages.h"

namespace pagoda::sampling {

namespace {

std::uint64_t seed_of(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

}  // namespace

std::int32_t argmax(std::span<const float> logits) {
  PAGODA_CHECK(!logits.empty()) << "empty logits";
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<std::int32_t>(best);
}

Sampler::Sampler(const SamplingParams& params)
    : greedy_(params.is_greedy()), rng_(seed_of(params)) {
  if (greedy_) return;
  stages_.push_back(std::make_unique<TemperatureStage>(static_cast<float>(params.temperature)));
  if (params.top_k > 0) stages_.push_back(std::make_unique<TopKStage>(params.top_k));
  if (params.top_p < 1.0) stages_.push_back(std::make_unique<TopPStage>(params.top_p));
  if (params.min_p > 0.0) stages_.push_back(std::make_unique<MinPStage>(params.min_p));
}

void Sampler::run_stages(std::span<const float> logits) {
  candidates_.reset(logits);
  for (auto& stage : stages_) stage->apply(candidates_);
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  if (greedy_) return argmax(logits);
  run_stages(logits);
  return draw();
}

const Candidates& Sampler::candidates_for(std::span<const float> logits) {
  if (greedy_) {
    candidates_.entries = {{logits[argmax(logits)], argmax(logits)}};
    candidates_.sorted = true;
  } else {
    run_stages(logits);
  }
  return candidates_;
}

void Sampler::accept(std::int32_t token) {
  for (auto& stage : stages_) stage->accept(token);
}

// Inverse-CDF draw over softmax(candidates): u in [0, 1) from the top 53 bits of one generator
// output, so a seed gives the same tokens with any standard library.
std::int32_t Sampler::draw() {
  const auto& entries = candidates_.entries;
  const double max_logit = candidates_.max_logit();
  double total = 0.0;
  for (const Candidate& c : entries) total += std::exp(double{c.logit} - max_logit);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double target = u * total;
  for (const Candidate& c : entries) {
    target -= std::exp(double{c.logit} - max_logit);
    if (target < 0.0) return c.id;
  }
  return entries.back().id;  // u * total rounded up to total.
}

}  // namespace pagoda::sampling
