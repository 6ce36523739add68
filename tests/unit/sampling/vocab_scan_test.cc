// The passes behind HostSampler's fast path (vectorized where the CPU allows) against plain
// sorts and loops, at sizes around the 8-lane width, with ties and -inf. Fresh inputs each run
// unless PAGODA_TEST_SEED fixes them.
#include "sampling/vocab_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sampling/random_draw.h"

namespace pagoda::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* fixed = std::getenv("PAGODA_TEST_SEED");
    if (fixed != nullptr) return static_cast<std::uint64_t>(std::strtoull(fixed, nullptr, 10));
    return (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }();
  return seed;
}

std::string seed_trace() {
  return "rerun with PAGODA_TEST_SEED=" + std::to_string(test_seed());
}

constexpr std::int64_t kSizes[] = {1, 2, 7, 8, 9, 15, 16, 17, 1000, 1031, 49153};

// Normals, or few distinct levels (ties), with some -inf half of the time.
std::vector<float> random_values(std::mt19937_64& rng, std::int64_t n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  const bool levels = rng() % 2 == 0;
  const bool masked = rng() % 2 == 0;
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (float& v : x) {
    v = levels ? static_cast<float>(rng() % 6) : normal(rng);
    if (masked && rng() % 4 == 0) v = -kInf;
  }
  return x;
}

TEST(VocabScan, ArgmaxIsTheFirstLargest) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (const std::int64_t n : kSizes) {
    const std::vector<float> x = random_values(rng, n);
    EXPECT_EQ(argmax_index(x), std::max_element(x.begin(), x.end()) - x.begin()) << "n " << n;
  }
  EXPECT_EQ(argmax_index(std::vector<float>(9, -kInf)), 0);
}

TEST(VocabScan, KthLargestMatchesSort) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  std::vector<float> buffer;
  for (const std::int64_t n : kSizes) {
    const std::vector<float> x = random_values(rng, n);
    std::vector<float> sorted = x;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (const std::int64_t k :
         {std::int64_t{1}, std::int64_t{2}, n / 3 + 1, std::int64_t(rng() % n) + 1,
          std::max<std::int64_t>(1, n - 1), n}) {
      if (k > n) continue;
      EXPECT_EQ(kth_largest(x, k, buffer), sorted[static_cast<std::size_t>(k - 1)])
          << "n " << n << " k " << k;
    }
  }
}

// The largest t whose p >= t reach the target, by a walk down the sorted values.
double sorted_walk_threshold(std::vector<double> p, double target) {
  std::sort(p.begin(), p.end(), std::greater<>());
  double mass = 0.0;
  for (std::size_t i = 0; i < p.size();) {
    std::size_t end = i;
    for (; end < p.size() && p[end] == p[i]; ++end) mass += p[end];
    if (mass >= target) return p[i];
    i = end;
  }
  return p.back();
}

TEST(VocabScan, MassThresholdMatchesSortedWalk) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (const std::int64_t n : kSizes) {
    for (int trial = 0; trial < 20; ++trial) {
      // Multiples of 2^-26 (many ties, over 20 binary exponents) sum exactly in any order, so
      // both answers are exact.
      std::vector<double> p(static_cast<std::size_t>(n));
      for (double& v : p) v = std::ldexp(static_cast<double>(rng() % 65) / 64.0, -(rng() % 20));
      // Half the targets are exactly the mass of the values >= one of them: the edge where the
      // running sum meets the target.
      double target = std::uniform_real_distribution<double>(0.0, 1.0)(rng) *
                      std::accumulate(p.begin(), p.end(), 0.0);
      if (trial % 2 == 0) {
        const double at = p[rng() % p.size()];
        target = 0.0;
        for (const double v : p) target += v >= at ? v : 0.0;
      }
      const double expected = sorted_walk_threshold(p, target);
      EXPECT_EQ(mass_threshold(p, target), expected) << "n " << n << " target " << target;
    }
  }
}

TEST(VocabScan, GumbelRaceMatchesScalarScores) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (const std::int64_t n : kSizes) {
    for (const bool with_ids : {false, true}) {
      const std::vector<float> x = random_values(rng, n);
      // Ids: an increasing random subset of a larger vocabulary, as the candidates are.
      std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
      std::int32_t next = 0;
      for (auto& id : ids) id = next += 1 + static_cast<std::int32_t>(rng() % 5);
      const std::int32_t* id_data = with_ids ? ids.data() : nullptr;
      const float scale = std::uniform_real_distribution<float>(0.3f, 3.0f)(rng);
      const std::uint64_t key = draw_key(rng(), static_cast<std::int64_t>(rng() % 1000));
      const auto score = [&](std::size_t i) {
        const auto id = static_cast<std::uint32_t>(with_ids ? ids[i] : i);
        return x[i] * scale + token_gumbel(key, id);
      };
      std::size_t expected = 0;
      for (std::size_t i = 1; i < x.size(); ++i) {
        if (score(i) > score(expected)) expected = i;
      }
      const auto got = static_cast<std::size_t>(gumbel_race(x, scale, id_data, key));
      SCOPED_TRACE(testing::Message() << "n " << n << (with_ids ? " with ids" : ""));
      ASSERT_LT(got, x.size());
      // The vectorized log may move a score by an ulp: only a near-tie may pick another index.
      if (got != expected) {
        EXPECT_NEAR(score(got), score(expected), 1e-5f * (1.0f + std::abs(score(expected))));
      }
    }
  }
}

// Two tokens whose scaled logits are set so that their scores differ by a small `gap` under the
// scalar noise: the race must pick the better one for every gap above the vectorized log's
// rounding, so the noise itself agrees with token_gumbel() to ~1e-6 relative, not just the argmax
// of random scores (which an error of 1e-3 would rarely change).
TEST(VocabScan, GumbelRaceResolvesSmallGaps) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint64_t key = draw_key(rng(), trial);
    // 16 tokens so both lanes of a vector hold one, at random places.
    std::vector<float> x(16, -kInf);
    std::vector<std::int32_t> ids(16);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(rng() >> 40);
    const std::size_t a = rng() % 16;
    const std::size_t b = (a + 1 + rng() % 15) % 16;
    const float ga = token_gumbel(key, static_cast<std::uint32_t>(ids[a]));
    const float gb = token_gumbel(key, static_cast<std::uint32_t>(ids[b]));
    const float gap = 2e-5f * (1.0f + std::abs(ga));
    x[a] = 0.0f;
    x[b] = (ga - gb) + (rng() % 2 == 0 ? gap : -gap);
    const bool b_wins = x[b] + gb > ga;
    const std::int64_t winner = gumbel_race(x, 1.0f, ids.data(), key);
    ASSERT_EQ(winner, static_cast<std::int64_t>(b_wins ? b : a))
        << "gumbels " << ga << " and " << gb << ", trial " << trial;
  }
}

TEST(VocabScan, GatherSumAndExpMatchLoops) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (const std::int64_t n : kSizes) {
    const std::vector<float> x = random_values(rng, n);
    const float scale = 0.7f;
    const float floor = std::normal_distribution<float>(0.0f, 3.0f)(rng);
    std::vector<float> s(x.size() + 8);
    std::vector<std::int32_t> ids(x.size() + 8);
    const std::size_t count = gather_at_least(x, scale, floor, s.data(), ids.data());
    s.resize(count);
    ids.resize(count);
    std::vector<float> expected_s;
    std::vector<std::int32_t> expected_ids;
    double expected_sum = 0.0;
    const float shift = *std::max_element(x.begin(), x.end()) * scale;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] * scale >= floor) {
        expected_s.push_back(x[i] * scale);
        expected_ids.push_back(static_cast<std::int32_t>(i));
      }
      expected_sum += std::exp(double{x[i] * scale} - double{shift});
    }
    EXPECT_EQ(s, expected_s) << "n " << n;
    EXPECT_EQ(ids, expected_ids) << "n " << n;
    if (!std::isfinite(shift)) continue;
    // exp in fp32 within 2 ulp, 16-term partial sums in fp32.
    EXPECT_NEAR(sum_exp_scaled(x, scale, shift), expected_sum, 1e-6 * expected_sum) << "n " << n;
    std::vector<double> p(s.size());
    exp_shifted(s, shift, p.data());
    for (std::size_t i = 0; i < s.size(); ++i) {
      // The argument rounded to fp32 (half an ulp of |s - shift|), then exp within 2 ulp.
      const double arg = double{s[i]} - double{shift};
      const double exact = std::exp(arg);
      ASSERT_NEAR(p[i], exact, (2.5e-7 + std::abs(arg) * 0x1p-24) * exact + 1e-37)
          << "n " << n << ", candidate " << i;
    }
  }
}

}  // namespace
}  // namespace pagoda::sampling
