// Batched sampling: seeded requests draw the same tokens alone and among others with random
// params; penalties, logit_bias and min_tokens match a naive reference; logprobs equal
// log_softmax of the raw logits; each warper alone follows its distribution (chi-square).
#include "sampling/batch_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "sampling/logprobs.h"

namespace pagoda::sampling {
namespace {

constexpr std::int64_t kVocab = 64;

// Logits of request `tag` at `step`, the same whatever else is in the batch.
std::vector<float> logits_of(std::uint64_t tag, int step, std::int64_t vocab = kVocab) {
  std::mt19937_64 rng(tag * 1000003 + static_cast<std::uint64_t>(step));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> l(static_cast<std::size_t>(vocab));
  for (float& x : l) x = normal(rng);
  return l;
}

SamplingParams random_params(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  SamplingParams p;
  p.temperature = u(rng) < 0.2 ? 0.0 : 0.3 + u(rng);
  p.top_k = u(rng) < 0.5 ? 0 : 1 + static_cast<std::int64_t>(u(rng) * 20);
  p.top_p = u(rng) < 0.5 ? 1.0 : 0.5 + 0.5 * u(rng);
  p.min_p = u(rng) < 0.5 ? 0.0 : 0.1 * u(rng);
  p.presence_penalty = u(rng) < 0.5 ? 0.0 : u(rng);
  p.frequency_penalty = u(rng) < 0.5 ? 0.0 : u(rng);
  p.repetition_penalty = u(rng) < 0.5 ? 1.0 : 1.0 + u(rng);
  if (u(rng) < 0.3) p.logprobs = 3;
  if (u(rng) < 0.5) p.seed = rng();
  return p;
}

std::vector<std::int32_t> run_target(int batch_size, int steps) {
  const SamplingParams target{.temperature = 0.9,
                              .top_p = 0.95,
                              .seed = 1234,
                              .presence_penalty = 0.5,
                              .repetition_penalty = 1.2};
  BatchSampler sampler;
  std::mt19937_64 rng(static_cast<std::uint64_t>(batch_size));
  const std::vector<std::int32_t> prompt = {1, 2, 3, 5, 8};
  // The target sits in the middle of the batch.
  for (int i = 0; i < batch_size; ++i) {
    if (i == batch_size / 2)
      sampler.add("target", target, prompt, {63});
    else
      sampler.add("r" + std::to_string(i), random_params(rng), prompt, {63});
  }
  std::vector<std::int32_t> out;
  std::optional<SampledLogprobs> lp;
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < batch_size; ++i) {
      const std::string id = i == batch_size / 2 ? "target" : "r" + std::to_string(i);
      const auto logits = logits_of(id == "target" ? 7 : static_cast<std::uint64_t>(100 + i), step);
      const std::int32_t token = sampler.sample(id, logits, lp);
      if (id == "target") out.push_back(token);
    }
  }
  return out;
}

TEST(BatchSamplerTest, SeededRequestIsReproducibleInAnyBatch) {
  const auto alone = run_target(1, 200);
  EXPECT_EQ(run_target(1, 200), alone);
  EXPECT_EQ(run_target(7, 200), alone);
  EXPECT_EQ(run_target(32, 200), alone);
}

// vLLM's definition, the slow way: repetition over prompt + output, the others over output.
std::vector<double> penalized(std::vector<float> logits, const std::vector<std::int32_t>& prompt,
                              const std::vector<std::int32_t>& output, const SamplingParams& p) {
  std::vector<double> out(logits.begin(), logits.end());
  for (std::size_t id = 0; id < out.size(); ++id) {
    const auto count = std::count(output.begin(), output.end(), static_cast<std::int32_t>(id));
    const bool in_prompt =
        std::find(prompt.begin(), prompt.end(), static_cast<std::int32_t>(id)) != prompt.end();
    if (in_prompt || count > 0) {
      out[id] = out[id] > 0 ? out[id] / p.repetition_penalty : out[id] * p.repetition_penalty;
    }
    out[id] -= p.frequency_penalty * static_cast<double>(count);
    if (count > 0) out[id] -= p.presence_penalty;
  }
  return out;
}

TEST(BatchSamplerTest, PenaltiesMatchTheReference) {
  const SamplingParams p{.temperature = 1.0,
                         .presence_penalty = 0.7,
                         .frequency_penalty = 0.3,
                         .repetition_penalty = 1.5};
  const std::vector<std::int32_t> prompt = {4, 4, 9, 10};
  Sampler sampler(p, prompt);
  const std::vector<std::int32_t> output = {9, 11, 11, 12, 11};
  for (const std::int32_t t : output) sampler.accept(t);
  const auto logits = logits_of(3, 0);
  const auto want = penalized(logits, prompt, output, p);
  const Candidates& got = sampler.candidates_for(logits);
  ASSERT_EQ(got.entries.size(), static_cast<std::size_t>(kVocab));
  for (const Candidate& c : got.entries) EXPECT_NEAR(c.logit, want[c.id], 1e-5) << c.id;
}

TEST(BatchSamplerTest, LogitBiasAndMinTokensSteerGreedy) {
  std::vector<float> logits(kVocab, 0.0f);
  logits[5] = 3.0f;
  logits[63] = 5.0f;  // EOS is the favourite
  Sampler biased({.temperature = 0.0, .logit_bias = {{7, 10.0}}});
  EXPECT_EQ(biased.sample(logits), 7);
  Sampler min_tokens({.temperature = 0.0, .min_tokens = 2}, {}, {63});
  EXPECT_EQ(min_tokens.sample(logits), 5);
  min_tokens.accept(5);
  EXPECT_EQ(min_tokens.sample(logits), 5);
  min_tokens.accept(5);
  EXPECT_EQ(min_tokens.sample(logits), 63);
}

TEST(BatchSamplerTest, LogprobsAreLogSoftmaxOfTheRawLogits) {
  const auto logits = logits_of(11, 0, 5000);
  double z = 0.0;
  const double m = *std::max_element(logits.begin(), logits.end());
  for (float l : logits) z += std::exp(l - m);
  const auto logprob = [&](std::int32_t id) { return logits[id] - m - std::log(z); };
  SampledLogprobs out;
  compute_logprobs(logits, 42, 5, out);
  EXPECT_NEAR(out.logprob, logprob(42), 1e-5);
  EXPECT_EQ(out.rank, 1 + std::count_if(logits.begin(), logits.end(),
                                        [&](float l) { return l > logits[42]; }));
  ASSERT_EQ(out.top.size(), 5u);
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out.top[i].first, order[i]);
    EXPECT_NEAR(out.top[i].second, logprob(order[i]), 1e-5);
  }
  // Penalties and temperature do not change the reported logprobs (raw_logprobs).
  BatchSampler sampler;
  const std::vector<std::int32_t> prompt = {42};
  sampler.add("a", {.temperature = 0.3, .repetition_penalty = 2.0, .logprobs = 2}, prompt, {});
  std::optional<SampledLogprobs> lp;
  const std::int32_t token = sampler.sample("a", logits, lp);
  ASSERT_TRUE(lp.has_value());
  EXPECT_EQ(lp->token_id, token);
  EXPECT_NEAR(lp->logprob, logprob(token), 1e-5);
}

// Logprobs computed only because a trace asked for them are timed as tracing cost; ones the
// client asked for are not.
TEST(BatchSamplerTest, TimesTraceOnlyLogprobs) {
  const auto logits = logits_of(3, 0, 49152);
  const std::vector<std::int32_t> prompt = {1};
  BatchSampler sampler;
  sampler.add("client", {.temperature = 0.0, .logprobs = 5}, prompt, {});
  std::optional<SampledLogprobs> lp;
  for (int i = 0; i < 4; ++i) sampler.sample("client", logits, lp);
  ASSERT_TRUE(lp.has_value());
  EXPECT_EQ(sampler.trace_logprob_seconds(), 0.0);
  sampler.add("traced", {.temperature = 0.0, .logprobs = 5}, prompt, {},
              /*logprobs_for_trace_only=*/true);
  for (int i = 0; i < 4; ++i) sampler.sample("traced", logits, lp);
  ASSERT_TRUE(lp.has_value());
  EXPECT_EQ(lp->top.size(), 5u);
  EXPECT_GT(sampler.trace_logprob_seconds(), 0.0);
}

// Chi-square of 100,000 draws against the distribution each warper alone should leave.
void expect_distribution(const SamplingParams& params, const std::vector<float>& logits,
                         const std::map<std::int32_t, double>& want) {
  constexpr int kDraws = 100000;
  Sampler sampler(params);
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.sample(logits)];
  double chi2 = 0.0;
  for (const auto& [id, n] : counts) EXPECT_TRUE(want.contains(id)) << "drew dropped token " << id;
  for (const auto& [id, p] : want) {
    const double diff = counts[id] - p * kDraws;
    chi2 += diff * diff / (p * kDraws);
  }
  // 0.999 quantile of chi-square with df = want.size() - 1 (Wilson-Hilferty).
  const double df = static_cast<double>(want.size() - 1);
  const double z = 3.090;
  const double critical = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  EXPECT_LT(chi2, critical) << "df " << df;
}

std::map<std::int32_t, double> softmax_of(const std::vector<float>& logits,
                                          const std::vector<std::int32_t>& keep, double t) {
  std::map<std::int32_t, double> out;
  double z = 0.0;
  for (auto id : keep) z += std::exp(logits[id] / t);
  for (auto id : keep) out[id] = std::exp(logits[id] / t) / z;
  return out;
}

const std::vector<float> kLogits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f};
const std::vector<std::int32_t> kAll = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(BatchSamplerTest, TemperatureAloneFollowsItsDistribution) {
  expect_distribution({.temperature = 0.7, .seed = 1}, kLogits, softmax_of(kLogits, kAll, 0.7));
}

TEST(BatchSamplerTest, TopKAloneFollowsItsDistribution) {
  expect_distribution({.temperature = 1.0, .top_k = 3, .seed = 2}, kLogits,
                      softmax_of(kLogits, {0, 1, 2}, 1.0));
}

TEST(BatchSamplerTest, TopPAloneFollowsItsDistribution) {
  // Softmax mass of the top tokens: 0.40, 0.65, 0.80, ...; p = 0.7 keeps three.
  expect_distribution({.temperature = 1.0, .top_p = 0.7, .seed = 3}, kLogits,
                      softmax_of(kLogits, {0, 1, 2}, 1.0));
}

TEST(BatchSamplerTest, MinPAloneFollowsItsDistribution) {
  // p_i / p_max = exp(l_i - 2) >= 0.2 keeps logits >= 2 + ln 0.2 = 0.39: ids 0..3.
  expect_distribution({.temperature = 1.0, .min_p = 0.2, .seed = 4}, kLogits,
                      softmax_of(kLogits, {0, 1, 2, 3}, 1.0));
}

TEST(BatchSamplerTest, ValidationNamesTheField) {
  const auto message = [](SamplingParams p, std::int64_t vocab = 0) {
    return p.validate(vocab).message();
  };
  EXPECT_NE(message({.presence_penalty = 3.0}).find("presence_penalty"), std::string::npos);
  EXPECT_NE(message({.frequency_penalty = -3.0}).find("frequency_penalty"), std::string::npos);
  EXPECT_NE(message({.repetition_penalty = 0.0}).find("repetition_penalty"), std::string::npos);
  EXPECT_NE(message({.logit_bias = {{70, 1.0}}}, 64).find("logit_bias"), std::string::npos);
  EXPECT_NE(message({.logit_bias = {{1, 101.0}}}).find("logit_bias"), std::string::npos);
  EXPECT_NE(message({.min_tokens = -1}).find("min_tokens"), std::string::npos);
  EXPECT_NE(message({.logprobs = 21}).find("logprobs"), std::string::npos);
  EXPECT_NE(message({.n = 0}).find("n must"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate(64).ok());
}

}  // namespace
}  // namespace pagoda::sampling
