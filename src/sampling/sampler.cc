#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "sampling/logits_processors.h"
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

Sampler::Sampler(const SamplingParams& params, std::span<const std::int32_t> prompt_token_ids,
                 std::vector<std::int32_t> stop_token_ids)
    : greedy_(params.is_greedy()), rng_(seed_of(params)) {
  if (params.min_tokens > 0 && !stop_token_ids.empty()) {
    processors_.push_back(
        std::make_unique<MinTokensStage>(params.min_tokens, std::move(stop_token_ids)));
  }
  if (!params.logit_bias.empty()) {
    processors_.push_back(std::make_unique<LogitBiasStage>(params.logit_bias));
  }
  if (params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 ||
      params.repetition_penalty != 1.0) {
    processors_.push_back(
        std::make_unique<PenaltyStage>(params.presence_penalty, params.frequency_penalty,
                                       params.repetition_penalty, prompt_token_ids));
  }
  if (greedy_) return;
  stages_.push_back(std::make_unique<TemperatureStage>(static_cast<float>(params.temperature)));
  if (params.top_k > 0) stages_.push_back(std::make_unique<TopKStage>(params.top_k));
  if (params.top_p < 1.0) stages_.push_back(std::make_unique<TopPStage>(params.top_p));
  if (params.min_p > 0.0) stages_.push_back(std::make_unique<MinPStage>(params.min_p));
}

void Sampler::run_stages(std::span<const float> logits) {
  candidates_.reset(logits);
  for (auto& stage : processors_) stage->apply(candidates_);
  if (greedy_) {
    // Argmax of the processed logits; candidates are still in id order, so ties go to the
    // lowest id as in argmax().
    const auto best =
        std::max_element(candidates_.entries.begin(), candidates_.entries.end(),
                         [](const Candidate& a, const Candidate& b) { return a.logit < b.logit; });
    const Candidate kept = *best;
    candidates_.entries.assign(1, kept);
    candidates_.sorted = true;
    return;
  }
  for (auto& stage : stages_) stage->apply(candidates_);
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  // The common greedy case skips the copy into candidates.
  if (greedy_ && processors_.empty()) return argmax(logits);
  run_stages(logits);
  return greedy_ ? candidates_.entries.front().id : draw();
}

const Candidates& Sampler::candidates_for(std::span<const float> logits) {
  run_stages(logits);
  return candidates_;
}

void Sampler::accept(std::int32_t token) {
  for (auto& stage : processors_) stage->accept(token);
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
