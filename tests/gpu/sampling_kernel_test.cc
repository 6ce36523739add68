// The GPU sampler against the CPU sampler's semantics: greedy and top-k = 1 are argmax (lowest
// id on ties); every draw lies in the set the CPU stages keep (top-k, top-p, min-p); and the
// draws follow the renormalized distribution (chi-square over 100k draws, fixed seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "kernels/sampling/sampling.h"
#include "sampling/candidates.h"
#include "sampling/sampler.h"
#include "sampling/sampler_stages.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using gpu_test::DeviceVector;

struct RowParams {
  float temperature = 1.0f;
  std::int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// Samples `rows` rows of `logits` (each row its own copy) with step offsets 0..rows-1.
std::vector<std::int32_t> sample(const std::vector<float>& logits, std::int64_t rows,
                                 std::int64_t vocab, const RowParams& rp, std::uint64_t seed) {
  DeviceVector<float> d_logits(logits);
  DeviceVector<float> t(std::vector<float>(rows, rp.temperature));
  DeviceVector<std::int32_t> k(std::vector<std::int32_t>(rows, rp.top_k));
  DeviceVector<float> p(std::vector<float>(rows, rp.top_p));
  DeviceVector<float> m(std::vector<float>(rows, rp.min_p));
  DeviceVector<std::uint64_t> seeds(std::vector<std::uint64_t>(rows, seed));
  std::vector<std::uint64_t> steps(rows);
  for (std::int64_t i = 0; i < rows; ++i) steps[i] = static_cast<std::uint64_t>(i);
  DeviceVector<std::uint64_t> offsets(steps);
  DeviceVector<std::int32_t> out(std::vector<std::int32_t>(rows, -7));
  const Status s = kernels::launch_sample_tokens({.logits = d_logits.data(),
                                                  .num_rows = rows,
                                                  .vocab_size = vocab,
                                                  .temperature = t.data(),
                                                  .top_k = k.data(),
                                                  .top_p = p.data(),
                                                  .min_p = m.data(),
                                                  .seeds = seeds.data(),
                                                  .offsets = offsets.data(),
                                                  .out_tokens = out.data()},
                                                 nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out.download();
}

std::vector<float> repeat_rows(const std::vector<float>& row, std::int64_t rows) {
  std::vector<float> out;
  out.reserve(row.size() * rows);
  for (std::int64_t r = 0; r < rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

// The ids the CPU stages keep for these parameters.
std::set<std::int32_t> cpu_kept(const std::vector<float>& row, const RowParams& rp) {
  sampling::Candidates candidates;
  candidates.reset(row);
  sampling::TemperatureStage(rp.temperature).apply(candidates);
  if (rp.top_k > 0) sampling::TopKStage(rp.top_k).apply(candidates);
  if (rp.top_p < 1.0f) sampling::TopPStage(rp.top_p).apply(candidates);
  if (rp.min_p > 0.0f) sampling::MinPStage(rp.min_p).apply(candidates);
  std::set<std::int32_t> ids;
  for (const auto& c : candidates.entries) ids.insert(c.id);
  return ids;
}

TEST(GpuSampling, GreedyAndTopKOneAreArgmax) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(20);
  for (std::int64_t vocab : {1, 7, 1000, 128256}) {
    const std::int64_t rows = 9;
    std::vector<float> logits =
        gpu_test::random_vector(static_cast<std::size_t>(rows * vocab), rng, -20.0f, 20.0f);
    if (vocab > 10)
      logits[3 * vocab + 9] = logits[3 * vocab + 4] = 100.0f;  // a tie: lowest id wins
    const auto greedy = sample(logits, rows, vocab, {.temperature = 0.0f}, 1);
    const auto top1 = sample(logits, rows, vocab, {.temperature = 0.7f, .top_k = 1}, 1);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::span<const float> row(logits.data() + r * vocab, static_cast<std::size_t>(vocab));
      EXPECT_EQ(greedy[r], sampling::argmax(row)) << "vocab " << vocab << " row " << r;
      EXPECT_EQ(top1[r], sampling::argmax(row)) << "vocab " << vocab << " row " << r;
    }
  }
}

TEST(GpuSampling, DrawsStayInsideTheCpuKeptSet) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  const RowParams settings[] = {
      {.temperature = 1.0f, .top_k = 5},
      {.temperature = 0.8f, .top_p = 0.5f},
      {.temperature = 1.3f, .top_k = 40, .top_p = 0.9f},
      {.temperature = 1.0f, .min_p = 0.2f},
      {.temperature = 0.5f, .top_k = 100, .top_p = 0.95f, .min_p = 0.05f},
      // The top-k fast path's limit (k = its 512 sample groups): the largest sample it takes.
      {.temperature = 1.0f, .top_k = 512, .top_p = 0.9f}};
  // 32003: a row length that is no multiple of 4 (the fast path's scalar loads).
  for (std::int64_t vocab : {50, 32003, 128256}) {
    const std::vector<float> row =
        gpu_test::random_vector(static_cast<std::size_t>(vocab), rng, -8.0f, 8.0f);
    for (const RowParams& rp : settings) {
      const std::set<std::int32_t> kept = cpu_kept(row, rp);
      const std::int64_t rows = vocab >= 32000 ? 256 : 2000;  // keeps the host copy small
      const auto tokens = sample(repeat_rows(row, rows), rows, vocab, rp, 99);
      std::set<std::int32_t> seen;
      for (std::int32_t t : tokens) {
        EXPECT_TRUE(kept.count(t))
            << "token " << t << " outside the kept set, vocab " << vocab << " top_k " << rp.top_k
            << " top_p " << rp.top_p << " min_p " << rp.min_p;
        seen.insert(t);
      }
      // Not stuck on one token when several are likely.
      if (kept.size() >= 5) {
        EXPECT_GE(seen.size(), 2u);
      }
    }
  }
}

// A row of massive ties: every sample group's max is the tied value, so the top-k fast path's
// candidates overflow and the row takes the full-row path; the draws must still stay inside the
// CPU's kept set. The ties sit 35 below the high logits (weight e^-35 each, 1e-10 all together),
// so top-p keeps only the 10 distinct high ones whatever top-k does with the ties (the GPU keeps
// every tie at its cut-off, the CPU exactly k).
TEST(GpuSampling, TiedRowFallsBackToTheFullRowPath) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(24);
  const std::int64_t vocab = 128256;
  std::vector<float> row(static_cast<std::size_t>(vocab), -30.0f);
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::uniform_real_distribution<float> high(5.0f, 6.0f);
  for (int i = 0; i < 10; ++i) row[static_cast<std::size_t>(pick(rng))] = high(rng);
  const RowParams rp{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f};
  const std::set<std::int32_t> kept = cpu_kept(row, rp);
  ASSERT_LE(kept.size(), 10u);
  const auto tokens = sample(repeat_rows(row, 64), 64, vocab, rp, 3);
  std::set<std::int32_t> seen;
  for (std::int32_t t : tokens) {
    EXPECT_TRUE(kept.count(t)) << "token " << t << " outside the kept set";
    seen.insert(t);
  }
  EXPECT_GE(seen.size(), 2u);
}

// 100k draws over 10 ids with top_k 6: the counts follow the 6 renormalized probabilities
// (chi-square, 5 degrees of freedom, critical value 25.7 at p = 1e-4); the 4 cut ids never occur.
TEST(GpuSampling, DrawsFollowTheRenormalizedDistribution) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<float> row = {0.1f, 2.0f, -1.0f, 1.5f, 0.3f, 1.0f, -0.5f, 0.0f, 2.2f, 0.7f};
  const RowParams rp{.temperature = 0.9f, .top_k = 6};
  const std::int64_t rows = 100000;
  const auto tokens = sample(repeat_rows(row, rows), rows, 10, rp, 1234);
  std::vector<double> counts(10, 0.0);
  for (std::int32_t t : tokens) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 10);
    counts[t] += 1.0;
  }
  const std::set<std::int32_t> kept = cpu_kept(row, rp);
  ASSERT_EQ(kept.size(), 6u);
  double total = 0.0;
  for (std::int32_t id : kept) total += std::exp(row[id] / rp.temperature);
  double chi_square = 0.0;
  for (std::int32_t id = 0; id < 10; ++id) {
    if (!kept.count(id)) {
      EXPECT_EQ(counts[id], 0.0) << "id " << id << " is cut by top-k";
      continue;
    }
    const double expected = rows * std::exp(row[id] / rp.temperature) / total;
    chi_square += (counts[id] - expected) * (counts[id] - expected) / expected;
  }
  EXPECT_LT(chi_square, 25.7);
}

TEST(GpuSampling, SameSeedAndStepGiveTheSameToken) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  const std::int64_t vocab = 32000;
  const std::vector<float> row =
      gpu_test::random_vector(static_cast<std::size_t>(vocab), rng, -3.0f, 3.0f);
  const auto a = sample(repeat_rows(row, 64), 64, vocab, {.temperature = 1.0f, .top_p = 0.9f}, 5);
  const auto b = sample(repeat_rows(row, 64), 64, vocab, {.temperature = 1.0f, .top_p = 0.9f}, 5);
  const auto c = sample(repeat_rows(row, 64), 64, vocab, {.temperature = 1.0f, .top_p = 0.9f}, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace pagoda
