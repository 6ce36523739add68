#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/rms_norm.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_floats;
using testing::seed_trace;
using testing::test_seed;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Relative closeness for values produced by a handful of fp32 roundings (plus an fp32 sum of
// `n` squares for RMSNorm): a few ulp, scaled for the sum.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel,
                  float abs = 1e-30f) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), rel * std::fabs(want[i]) + abs)
        << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(RmsNormTest, MatchesReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 20);
  for (std::int64_t hidden : {1, 7, 64, 576, 1001}) {
    const std::int64_t tokens = 3;
    const std::vector<float> x = random_floats(rng, tokens * hidden, -3.0f, 3.0f);
    const std::vector<float> w = random_floats(rng, hidden, 0.5f, 1.5f);
    std::vector<float> got(x.size(), kNaN), want(x.size());
    rms_norm(x.data(), w.data(), 1e-5f, tokens, hidden, got.data());
    rms_norm_reference(x.data(), w.data(), 1e-5f, tokens, hidden, want.data());
    expect_close(got, want, 2e-6f + 1e-7f * std::sqrt(static_cast<float>(hidden)));
  }
}

TEST(RmsNormTest, FusedResidualAddEqualsAddThenNorm) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 21);
  const std::int64_t tokens = 5;
  const std::int64_t hidden = 100;
  std::vector<float> residual = random_floats(rng, tokens * hidden);
  const std::vector<float> x = random_floats(rng, tokens * hidden);
  const std::vector<float> w = random_floats(rng, hidden);
  std::vector<float> sum = residual;
  add_inplace(sum.data(), x.data(), tokens * hidden);
  std::vector<float> want(sum.size()), got(sum.size(), kNaN);
  rms_norm(sum.data(), w.data(), 1e-6f, tokens, hidden, want.data());
  add_rms_norm(residual.data(), x.data(), w.data(), 1e-6f, tokens, hidden, got.data());
  EXPECT_EQ(residual, sum);
  EXPECT_EQ(got, want);
}

TEST(ActivationTest, SiluMulMatchesReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 22);
  for (std::int64_t n : {1, 8, 13, 1536}) {
    std::vector<float> gate = random_floats(rng, n, -20.0f, 20.0f);
    gate[0] = -100.0f;  // exp overflows in the naive formula's range edges.
    if (n > 1) gate[1] = 90.0f;
    const std::vector<float> up = random_floats(rng, n, -2.0f, 2.0f);
    std::vector<float> got(n, kNaN), want(n);
    silu_mul(gate.data(), up.data(), n, got.data());
    silu_mul_reference(gate.data(), up.data(), n, want.data());
    expect_close(got, want, 1e-6f, 1e-30f);
  }
}

TEST(ActivationTest, SoftmaxMatchesReferenceAndZeroesMaskedLogits) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 23);
  for (std::int64_t n : {1, 9, 100, 49152}) {
    const std::int64_t rows = 2;
    std::vector<float> x = random_floats(rng, rows * n, -30.0f, 30.0f);
    x[0] = 1e4f;  // Large logits must not overflow.
    if (n > 2) x[2] = -std::numeric_limits<float>::infinity();
    std::vector<float> want = x;
    softmax(x.data(), rows, n);
    softmax_reference(want.data(), rows, n);
    // exp(x - max) inherits the fp32 rounding of x - max (HF rounds it too): up to
    // |x - max| * 2^-24 relative, 60 * 6e-8 = 3.6e-6 here.
    expect_close(x, want, 8e-6f, 1e-37f);
    if (n > 2) {
      EXPECT_EQ(x[2], 0.0f);
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
