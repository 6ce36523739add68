// compute_logprobs (vectorized where the CPU allows) against its scalar double-precision oracle
// on fresh random logits at awkward vocabulary sizes, with ties and masked (-inf) entries.
#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace pagoda::sampling {
namespace {

std::vector<float> random_logits(std::int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(static_cast<std::size_t>(n));
  for (float& l : logits) l = dist(rng);
  return logits;
}

void expect_matches_reference(const std::vector<float>& logits, std::int32_t token,
                              std::int64_t num_top) {
  SampledLogprobs fast;
  SampledLogprobs reference;
  compute_logprobs(logits, token, num_top, fast);
  compute_logprobs_reference(logits, token, num_top, reference);
  // exp in fp32 is within 2 ulp and each lane sums <= 8 terms in fp32 before the double total:
  // the normalizer's relative error stays below ~1e-6, so log Z is off by < 1e-6 absolute.
  const auto tolerance = [](float ref) { return 2e-6 + 1e-6 * std::abs(ref); };
  EXPECT_EQ(fast.token_id, reference.token_id);
  EXPECT_NEAR(fast.logprob, reference.logprob, tolerance(reference.logprob));
  EXPECT_EQ(fast.rank, reference.rank);
  ASSERT_EQ(fast.top.size(), reference.top.size());
  for (std::size_t i = 0; i < fast.top.size(); ++i) {
    EXPECT_EQ(fast.top[i].first, reference.top[i].first) << "top " << i;
    EXPECT_NEAR(fast.top[i].second, reference.top[i].second, tolerance(reference.top[i].second));
  }
}

TEST(ComputeLogprobs, MatchesReferenceOnRandomLogits) {
  std::mt19937 rng(20261122);
  for (const std::int64_t vocab : {1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 1000, 49152, 49155}) {
    for (const float scale : {0.5f, 4.0f, 30.0f}) {
      const std::vector<float> logits = random_logits(vocab, rng, scale);
      std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab) - 1);
      for (const std::int64_t num_top : {0, 1, 5, 20}) {
        SCOPED_TRACE(testing::Message()
                     << "vocab " << vocab << " scale " << scale << " top " << num_top);
        expect_matches_reference(logits, token(rng), num_top);
      }
    }
  }
}

TEST(ComputeLogprobs, TiesRankAndOrderLikeReference) {
  std::mt19937 rng(7);
  // Few distinct values: many ties, which the top list breaks by ascending id.
  std::uniform_int_distribution<int> level(0, 5);
  std::vector<float> logits(4099);
  for (float& l : logits) l = static_cast<float>(level(rng));
  for (const std::int32_t token : {0, 17, 4098}) expect_matches_reference(logits, token, 20);
}

TEST(ComputeLogprobs, MaskedLogitsCountAsZeroProbability) {
  std::mt19937 rng(11);
  std::vector<float> logits = random_logits(1031, rng, 3.0f);
  for (std::size_t i = 0; i < logits.size(); i += 3) {
    logits[i] = -std::numeric_limits<float>::infinity();
  }
  expect_matches_reference(logits, 1, 5);
  SampledLogprobs masked;
  compute_logprobs(logits, 0, 0, masked);
  EXPECT_EQ(masked.logprob, -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace pagoda::sampling
