// The sampler chain: greedy and top_k = 1 are argmax, every draw stays inside the set the stages
// leave, seeds reproduce, and the draws follow the renormalized distribution (chi-square).
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

namespace pagoda::sampling {
namespace {

std::vector<float> random_logits(std::size_t n, std::uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// The set the stages should keep, computed the slow, obvious way in double precision:
// temperature, then top-k, then top-p, then min-p (HF's order). Returns id -> probability.
std::map<std::int32_t, double> expected_distribution(const std::vector<float>& logits,
                                                     const SamplingParams& p) {
  std::vector<std::pair<double, std::int32_t>> order;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    order.push_back({double{logits[i]} / p.temperature, static_cast<std::int32_t>(i)});
  }
  std::sort(order.begin(), order.end(), [](auto a, auto b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && static_cast<std::size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  auto probs = [&order] {
    double z = 0.0;
    for (auto& [l, id] : order) z += std::exp(l - order[0].first);
    std::vector<double> out;
    for (auto& [l, id] : order) out.push_back(std::exp(l - order[0].first) / z);
    return out;
  };
  if (p.top_p < 1.0) {
    const auto pr = probs();
    double before = 0.0;
    std::size_t keep = 0;
    while (keep < order.size() && before < p.top_p) before += pr[keep++];
    order.resize(std::max<std::size_t>(keep, 1));
  }
  if (p.min_p > 0.0) {
    const auto pr = probs();
    std::size_t keep = 0;
    while (keep < order.size() && pr[keep] >= p.min_p * pr[0]) ++keep;
    order.resize(keep);
  }
  const auto pr = probs();
  std::map<std::int32_t, double> out;
  for (std::size_t i = 0; i < order.size(); ++i) out[order[i].second] = pr[i];
  return out;
}

TEST(SamplerTest, GreedyAndTopKOneAreArgmax) {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto logits = random_logits(1000, seed);
    const std::int32_t best = argmax(logits);
    EXPECT_EQ(logits[best], *std::max_element(logits.begin(), logits.end()));
    Sampler greedy({.temperature = 0.0});
    EXPECT_EQ(greedy.sample(logits), best);
    Sampler top1({.temperature = 1.5, .top_k = 1, .seed = seed});
    EXPECT_EQ(top1.sample(logits), best);
  }
}

TEST(SamplerTest, ArgmaxTakesTheFirstOfEqualLogits) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  EXPECT_EQ(argmax(logits), 1);
}

TEST(SamplerTest, DrawsStayInsideTheKeptSet) {
  const std::vector<SamplingParams> cases = {
      {.temperature = 1.0, .top_k = 5},
      {.temperature = 0.7, .top_p = 0.5},
      {.temperature = 1.3, .min_p = 0.2},
      {.temperature = 0.9, .top_k = 40, .top_p = 0.8, .min_p = 0.05},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SamplingParams params = cases[c];
    params.seed = c;
    Sampler sampler(params);
    for (std::uint64_t trial = 0; trial < 50; ++trial) {
      const auto logits = random_logits(500, 100 * c + trial);
      const auto allowed = expected_distribution(logits, params);
      const auto& kept = sampler.candidates_for(logits);
      EXPECT_EQ(kept.entries.size(), allowed.size()) << "case " << c;
      for (int draw = 0; draw < 20; ++draw) {
        EXPECT_TRUE(allowed.contains(sampler.sample(logits))) << "case " << c;
      }
    }
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const SamplingParams params{.temperature = 1.0, .top_p = 0.95};
  auto draws = [&](std::uint64_t seed) {
    SamplingParams p = params;
    p.seed = seed;
    Sampler sampler(p);
    std::vector<std::int32_t> out;
    for (std::uint64_t step = 0; step < 64; ++step)
      out.push_back(sampler.sample(random_logits(300, step, 1.0f)));
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

// Wilson-Hilferty: chi2 quantile ~ df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3, within 0.5% of the
// exact value for df >= 10; z = 3.0902 is the standard normal's 0.999 quantile (p = 0.001).
double chi_square_critical_p001(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3);
}

TEST(SamplerTest, DrawsFollowTheRenormalizedDistribution) {
  // 30 tokens: top_k keeps 20, top_p trims the tail, so the draw is checked against a
  // distribution that differs from the plain softmax.
  const auto logits = random_logits(30, 7, 1.0f);
  const SamplingParams params{.temperature = 0.8, .top_k = 20, .top_p = 0.9, .seed = 12345};
  const auto expected = expected_distribution(logits, params);
  ASSERT_GE(expected.size(), 10u);
  ASSERT_LT(expected.size(), 20u);

  Sampler sampler(params);
  constexpr int kDraws = 200000;
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.sample(logits)];
  double chi2 = 0.0;
  for (const auto& [id, prob] : expected) {
    const double want = prob * kDraws;
    const double diff = counts[id] - want;
    chi2 += diff * diff / want;
  }
  for (const auto& [id, count] : counts) EXPECT_TRUE(expected.contains(id)) << id;
  const int df = static_cast<int>(expected.size()) - 1;
  EXPECT_LT(chi2, chi_square_critical_p001(df)) << "df " << df;
}

TEST(SamplingParamsTest, RejectsOutOfRangeValues) {
  EXPECT_TRUE(SamplingParams{}.validate().ok());
  EXPECT_FALSE((SamplingParams{.temperature = -0.5}).validate().ok());
  EXPECT_FALSE((SamplingParams{.temperature = NAN}).validate().ok());
  EXPECT_FALSE((SamplingParams{.top_k = -2}).validate().ok());
  EXPECT_FALSE((SamplingParams{.top_p = 0.0}).validate().ok());
  EXPECT_FALSE((SamplingParams{.top_p = 1.5}).validate().ok());
  EXPECT_FALSE((SamplingParams{.min_p = 1.5}).validate().ok());
}

}  // namespace
}  // namespace pagoda::sampling
