#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "backend/cpu/row_decoder.h"
#include "model/dequantize.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_floats;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

struct Case {
  DType dtype;
  std::vector<std::int64_t> ks;  // Column counts to try: awkward, and whole blocks for quants.
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {DType::kF32, {1, 7, 33, 100, 257}}, {DType::kF16, {5, 40, 129}},
      {DType::kBF16, {3, 64, 131}},        {DType::kQ8_0, {32, 96, 544}},
      {DType::kQ4_0, {32, 160, 544}},      {DType::kQ4_1, {32, 96, 608}},
      {DType::kQ4_K, {256, 768}},          {DType::kQ6_K, {256, 512}},
  };
  return all;
}

// fp32 accumulation of K products: the error of a sum of K terms grows like sqrt(K) * eps *
// (sum of |terms|) for random rounding (the worst case is K * eps). Q4_1's kernel folds
// m * sum(x) in separately, so |m| * sum|x| joins the magnitude. 1e-6 * sqrt(K) is ~8 eps *
// sqrt(K): loose enough for blocked sums, tight enough to catch a wrong element or scale.
float tolerance(const float* x, const float* w_row, std::int64_t k) {
  double magnitude = 0.0;
  float max_w = 0.0f;
  for (std::int64_t i = 0; i < k; ++i) max_w = std::max(max_w, std::fabs(w_row[i]));
  for (std::int64_t i = 0; i < k; ++i) {
    magnitude += std::fabs(x[i]) * (std::fabs(w_row[i]) + max_w);
  }
  return static_cast<float>(1e-6 * std::sqrt(static_cast<double>(k)) * magnitude + 1e-7);
}

void expect_matmul_matches(ThreadPool& pool, std::mt19937_64& rng, DType dtype, std::int64_t m,
                           std::int64_t n, std::int64_t k, bool with_bias) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m) +
               " n=" + std::to_string(n) + " k=" + std::to_string(k));
  // One byte of offset: mapped GGUF tensors need not be aligned.
  const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k, 1);
  const TensorView w = dense_view(bytes.data() + 1, dtype, n, k);
  const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
  const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
  const float* b = with_bias ? bias.data() : nullptr;
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  matmul_reference(x.data(), m, w, b, expected.data());
  std::vector<float> w_rows(static_cast<std::size_t>(n * k));
  for (std::int64_t j = 0; j < n; ++j) decode_row(w, j, 0, k, w_rows.data() + j * k);

  for (MatmulKernel kernel : {MatmulKernel::kAuto, MatmulKernel::kDirect, MatmulKernel::kPacked,
                              MatmulKernel::kBlasPanel, MatmulKernel::kRowGroup}) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
    std::vector<float> y(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    matmul(pool, x.data(), m, w, b, y.data(), kernel);
    int failures = 0;
    for (std::int64_t i = 0; i < m && failures < 5; ++i) {
      for (std::int64_t j = 0; j < n && failures < 5; ++j) {
        const float tol = tolerance(x.data() + i * k, w_rows.data() + j * k, k);
        const float got = y[static_cast<std::size_t>(i * n + j)];
        const float want = expected[static_cast<std::size_t>(i * n + j)];
        if (!(std::fabs(got - want) <= tol)) {
          ADD_FAILURE() << "y[" << i << ", " << j << "] = " << got << ", want " << want << " +- "
                        << tol;
          ++failures;
        }
      }
    }
  }
}

TEST(MatmulTest, MatchesReferenceForEveryTypeAndShape) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  ThreadPool pool(3);
  for (const Case& c : cases()) {
    for (std::int64_t k : c.ks) {
      for (std::int64_t m : {1, 3, 7, 17, 64, 100}) {
        const std::int64_t n = m % 2 == 0 ? 37 : 19;
        expect_matmul_matches(pool, rng, c.dtype, m, n, k, m % 3 == 1);
      }
    }
  }
}

TEST(MatmulTest, SingleThreadAndOneOutputColumn) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 1);
  ThreadPool pool(1);
  for (DType dtype : {DType::kQ4_1, DType::kF16}) {
    expect_matmul_matches(pool, rng, dtype, 5, 1, 64, true);
    expect_matmul_matches(pool, rng, dtype, 20, 1, 64, false);
  }
}

TEST(MatmulTest, DecodeRowIsBitIdenticalToReferenceDequantizer) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 2);
  for (const Case& c : cases()) {
    const std::int64_t k = c.ks.back();
    const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, 3, k, 3);
    const TensorView w = dense_view(bytes.data() + 3, c.dtype, 3, k);
    std::vector<float> expected(static_cast<std::size_t>(k));
    std::vector<float> got(static_cast<std::size_t>(k));
    for (std::int64_t r = 0; r < 3; ++r) {
      const Status status = dequantize(c.dtype, std::span(w.row(r), w.row_stride), expected);
      ASSERT_TRUE(status.ok()) << status.to_string();
      decode_row(w, r, 0, k, got.data());
      for (std::int64_t i = 0; i < k; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i]))
            << dtype_name(c.dtype) << " row " << r << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
