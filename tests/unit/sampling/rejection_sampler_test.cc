// The rejection rule: greedy verification is argmax agreement with no draws; with sampling the
// first emitted token follows the target distribution p whatever the draft's q (chi-square over
// seeded verifications, for a draft model's q and for an n-gram's point mass); stateful stages
// see each accepted token before the next position is scored.
#include "sampling/rejection_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace pagoda::sampling {
namespace {

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0;
  return p;
}

// Rows of logits whose argmax is `winners[r]` (logit 5 against 0..vocab-1 scaled down).
std::vector<float> rows_with_argmax(const std::vector<std::int32_t>& winners, std::size_t vocab) {
  std::vector<float> logits;
  for (const std::int32_t w : winners) {
    for (std::size_t v = 0; v < vocab; ++v) logits.push_back(0.1f * static_cast<float>(v % 7));
    logits[logits.size() - vocab + static_cast<std::size_t>(w)] = 5.0f;
  }
  return logits;
}

TEST(RejectionSamplerTest, GreedyAcceptsWhileDraftsAreTheArgmaxThenEmitsTheArgmax) {
  const std::size_t vocab = 16;
  const auto logits = rows_with_argmax({3, 9, 4, 11}, vocab);
  {
    Sampler sampler(greedy_params());
    RejectionSampler verifier(greedy_params());
    EXPECT_EQ(verifier.verify(sampler, logits, std::vector<std::int32_t>{3, 9, 4}, {}),
              (std::vector<std::int32_t>{3, 9, 4, 11}));  // all accepted + bonus
  }
  {
    Sampler sampler(greedy_params());
    RejectionSampler verifier(greedy_params());
    EXPECT_EQ(verifier.verify(sampler, logits, std::vector<std::int32_t>{3, 2, 4}, {}),
              (std::vector<std::int32_t>{3, 9}));  // second rejected, replaced by the argmax
  }
  {
    Sampler sampler(greedy_params());
    RejectionSampler verifier(greedy_params());
    const std::vector<float> one_row(logits.begin(), logits.begin() + vocab);
    EXPECT_EQ(verifier.verify(sampler, one_row, std::vector<std::int32_t>{}, {}),
              (std::vector<std::int32_t>{3}));  // no drafts: a plain sample
  }
}

TEST(RejectionSamplerTest, StatefulStagesSeeTheHistoryAsOfEachPosition) {
  // Token 2 leads every row by 1.5; a frequency penalty of 2 per occurrence makes the second
  // position prefer token 5, exactly as plain decoding would after taking token 2.
  const std::size_t vocab = 8;
  std::vector<float> row(vocab, 0.0f);
  row[2] = 3.0f;
  row[5] = 1.5f;
  std::vector<float> logits;
  for (int r = 0; r < 3; ++r) logits.insert(logits.end(), row.begin(), row.end());
  SamplingParams params = greedy_params();
  params.frequency_penalty = 2.0;

  Sampler plain(params);
  std::vector<std::int32_t> expected;
  for (int r = 0; r < 3; ++r) {
    expected.push_back(plain.sample(row));
    plain.accept(expected.back());
  }
  ASSERT_EQ(expected, (std::vector<std::int32_t>{2, 5, 2}));  // 2 once penalized by 2 still wins

  Sampler sampler(params);
  RejectionSampler verifier(params);
  EXPECT_EQ(verifier.verify(sampler, logits, std::vector<std::int32_t>{2, 2}, {}),
            (std::vector<std::int32_t>{2, 5}));
  // The sampler took both tokens: its next plain sample continues the same history.
  EXPECT_EQ(sampler.sample(row), expected[2]);
}

// The 0.999 quantile of chi-square with `dof` degrees of freedom (Wilson-Hilferty).
double chi2_critical(double dof) {
  const double h = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - h + 3.090 * std::sqrt(h), 3);
}

std::vector<double> softmax(const std::vector<float>& logits) {
  double z = 0.0;
  std::vector<double> p;
  for (const float l : logits) z += std::exp(double{l});
  for (const float l : logits) p.push_back(std::exp(double{l}) / z);
  return p;
}

// Counts of the first emitted token over `n` verifications of one draft drawn from `q` (or the
// fixed token `point` when q is empty), each verifier seeded apart.
std::vector<std::int64_t> first_token_counts(const std::vector<float>& target_row,
                                             const std::vector<float>& q, std::int32_t point,
                                             int n) {
  const std::size_t vocab = target_row.size();
  std::vector<float> logits = target_row;
  logits.insert(logits.end(), target_row.begin(), target_row.end());
  std::mt19937_64 draft_rng(7);
  std::discrete_distribution<std::int32_t> draft_dist(q.begin(), q.end());
  std::vector<std::int64_t> counts(vocab, 0);
  for (int i = 0; i < n; ++i) {
    SamplingParams params;
    params.seed = static_cast<std::uint64_t>(i);
    Sampler sampler(params);
    RejectionSampler verifier(params);
    const std::int32_t draft = q.empty() ? point : draft_dist(draft_rng);
    const auto out = verifier.verify(sampler, logits, std::vector<std::int32_t>{draft}, q);
    ++counts[static_cast<std::size_t>(out.front())];
  }
  return counts;
}

double chi2_against(const std::vector<std::int64_t>& counts, const std::vector<double>& p) {
  double n = 0.0;
  for (const auto c : counts) n += static_cast<double>(c);
  double chi2 = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double expected = n * p[v];
    chi2 += (static_cast<double>(counts[v]) - expected) *
            (static_cast<double>(counts[v]) - expected) / expected;
  }
  return chi2;
}

TEST(RejectionSamplerTest, DraftModelDraftsStillYieldTheTargetDistribution) {
  const std::vector<float> target = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f};
  // A draft that disagrees: it favours what the target does not.
  const std::vector<float> q = {0.05f, 0.40f, 0.30f, 0.05f, 0.15f, 0.05f};
  const auto counts = first_token_counts(target, q, 0, 20000);
  const double chi2 = chi2_against(counts, softmax(target));
  EXPECT_LT(chi2, chi2_critical(5.0)) << "chi-square " << chi2;
}

TEST(RejectionSamplerTest, NgramPointMassDraftsStillYieldTheTargetDistribution) {
  const std::vector<float> target = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f};
  for (const std::int32_t point : {3, 5}) {  // the target's favourite, and a long shot
    const auto counts = first_token_counts(target, {}, point, 20000);
    const double chi2 = chi2_against(counts, softmax(target));
    EXPECT_LT(chi2, chi2_critical(5.0)) << "draft " << point << ": chi-square " << chi2;
  }
}

TEST(RejectionSamplerTest, TheTestCatchesAVerifierGivenTheWrongQ) {
  // The distribution test can fail: drafts drawn from q but verified against a uniform q skew
  // the result (expected chi-square ~5600 at this size), and the statistic shows it.
  const std::vector<float> target = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f};
  const std::vector<float> q = {0.05f, 0.40f, 0.30f, 0.05f, 0.15f, 0.05f};
  const std::vector<float> claimed(target.size(), 1.0f / static_cast<float>(target.size()));
  std::mt19937_64 draft_rng(7);
  std::discrete_distribution<std::int32_t> draft_dist(q.begin(), q.end());
  std::vector<std::int64_t> counts(target.size(), 0);
  std::vector<float> logits = target;
  logits.insert(logits.end(), target.begin(), target.end());
  for (int i = 0; i < 20000; ++i) {
    SamplingParams params;
    params.seed = static_cast<std::uint64_t>(i);
    Sampler sampler(params);
    RejectionSampler verifier(params);
    const std::vector<std::int32_t> draft = {draft_dist(draft_rng)};
    ++counts[static_cast<std::size_t>(verifier.verify(sampler, logits, draft, claimed).front())];
  }
  EXPECT_GT(chi2_against(counts, softmax(target)), chi2_critical(5.0));
}

TEST(RejectionSamplerTest, SeededVerificationIsReproducible) {
  const std::vector<float> target = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f};
  std::vector<float> logits;
  for (int r = 0; r < 4; ++r) logits.insert(logits.end(), target.begin(), target.end());
  SamplingParams params;
  params.seed = 42;
  std::vector<std::vector<std::int32_t>> runs;
  for (int run = 0; run < 2; ++run) {
    Sampler sampler(params);
    RejectionSampler verifier(params);
    std::vector<std::int32_t> all;
    for (int step = 0; step < 50; ++step) {
      const auto out = verifier.verify(sampler, logits, std::vector<std::int32_t>{3, 3, 0}, {});
      all.insert(all.end(), out.begin(), out.end());
    }
    runs.push_back(all);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace pagoda::sampling
