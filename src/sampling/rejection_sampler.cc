#include "sampling/rejection_sampler.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace pagoda::sampling {

namespace {

// Keeps a seeded request's acceptance draws independent of its Sampler's draws, which the
// seed itself drives.
constexpr std::uint64_t kStreamOffset = 0x9E3779B97F4A7C15ULL;

std::uint64_t seed_of(const SamplingParams& params) {
  if (params.seed) return *params.seed ^ kStreamOffset;
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

}  // namespace

RejectionSampler::RejectionSampler(const SamplingParams& params) : rng_(seed_of(params)) {}

double RejectionSampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

std::vector<std::int32_t> RejectionSampler::verify(Sampler& sampler,
                                                   std::span<const float> target_logits,
                                                   std::span<const std::int32_t> draft_token_ids,
                                                   std::span<const float> draft_probs) {
  const std::size_t k = draft_token_ids.size();
  PAGODA_CHECK(!target_logits.empty() && target_logits.size() % (k + 1) == 0)
      << "target logits of " << target_logits.size() << " floats for " << k << " drafts";
  const std::size_t vocab = target_logits.size() / (k + 1);
  PAGODA_CHECK(draft_probs.empty() || draft_probs.size() == k * vocab)
      << "draft probabilities of " << draft_probs.size() << " floats for " << k << " drafts";
  std::vector<std::int32_t> out;
  out.reserve(k + 1);
  for (std::size_t j = 0; j < k; ++j) {
    const std::int32_t draft = draft_token_ids[j];
    PAGODA_CHECK(draft >= 0 && static_cast<std::size_t>(draft) < vocab)
        << "draft token " << draft << " outside the vocabulary";
    const Candidates& candidates = sampler.candidates_for(target_logits.subspan(j * vocab, vocab));
    const std::span<const float> q =
        draft_probs.empty() ? draft_probs : draft_probs.subspan(j * vocab, vocab);
    bool accepted;
    if (candidates.entries.size() == 1) {
      accepted = candidates.entries.front().id == draft;  // greedy: no draw
    } else {
      const double max_logit = candidates.max_logit();
      double total = 0.0;
      double draft_weight = 0.0;
      for (const Candidate& c : candidates.entries) {
        const double w = std::exp(double{c.logit} - max_logit);
        total += w;
        if (c.id == draft) draft_weight = w;
      }
      const double p = draft_weight / total;
      const double q_draft = q.empty() ? 1.0 : double{q[static_cast<std::size_t>(draft)]};
      accepted = uniform() * q_draft < p;
    }
    const std::int32_t token = accepted ? draft : draw_residual(candidates, draft, q);
    sampler.accept(token);
    out.push_back(token);
    if (!accepted) return out;
  }
  const std::int32_t bonus = sampler.sample(target_logits.subspan(k * vocab, vocab));
  sampler.accept(bonus);
  out.push_back(bonus);
  return out;
}

// normalize(max(0, p - q)) over the candidates (tokens outside them have p = 0, so no mass).
// With q a point mass on the draft this is p without the draft, renormalized.
std::int32_t RejectionSampler::draw_residual(const Candidates& candidates, std::int32_t draft_token,
                                             std::span<const float> draft_probs) {
  const auto& entries = candidates.entries;
  if (entries.size() == 1) return entries.front().id;
  const double max_logit = candidates.max_logit();
  double total_p = 0.0;
  weights_.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    weights_[i] = std::exp(double{entries[i].logit} - max_logit);
    total_p += weights_[i];
  }
  double total = 0.0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::int32_t id = entries[i].id;
    const double q = draft_probs.empty() ? (id == draft_token ? 1.0 : 0.0)
                                         : double{draft_probs[static_cast<std::size_t>(id)]};
    weights_[i] = std::max(0.0, weights_[i] / total_p - q);
    total += weights_[i];
  }
  // p == q up to rounding, so a rejection had probability ~0: draw from p itself.
  if (!(total > 0.0)) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      weights_[i] = std::exp(double{entries[i].logit} - max_logit);
    }
    total = total_p;
  }
  double target = uniform() * total;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    target -= weights_[i];
    if (target < 0.0) return entries[i].id;
  }
  for (std::size_t i = entries.size(); i-- > 0;) {
    if (weights_[i] > 0.0) return entries[i].id;  // u * total rounded up to total
  }
  return entries.back().id;
}

}  // namespace pagoda::sampling
