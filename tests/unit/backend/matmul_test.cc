#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/int16_types.h"
#include "backend/cpu/matmul_avx512.h"
#include "backend/cpu/matmul_broadcast_avx512.h"
#include "backend/cpu/row_decoder.h"
#include "matmul_tolerance.h"
#include "model/dequantize.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::fp32_tolerance;
using testing::int16_rounding_bound;
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

  for (MatmulKernel kernel :
       {MatmulKernel::kAuto, MatmulKernel::kDirect, MatmulKernel::kPacked, MatmulKernel::kBlasPanel,
        MatmulKernel::kRowGroup, MatmulKernel::kBroadcast, MatmulKernel::kBroadcastInt16}) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
    // The int16 kernels (kAuto's pick at every row count on an AVX2 CPU: AVX-512 VNNI or their
    // AVX2 twins) round x, at any m; on other weight types or CPUs they fall back to fp32 kernels.
    const MatmulKernel chosen = kernel == MatmulKernel::kAuto ? matmul_kernel_for(m) : kernel;
    const bool int16_kernel =
        chosen == MatmulKernel::kBroadcastInt16 || chosen == MatmulKernel::kDirectInt16;
    const bool rounds_x = int16_kernel && cpu_has_avx2() && int16_decodes(dtype);
    std::vector<float> y(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    matmul(pool, x.data(), m, w, b, y.data(), kernel);
    int failures = 0;
    for (std::int64_t i = 0; i < m && failures < 5; ++i) {
      for (std::int64_t j = 0; j < n && failures < 5; ++j) {
        const float* xi = x.data() + i * k;
        const float* wj = w_rows.data() + j * k;
        const float got = y[static_cast<std::size_t>(i * n + j)];
        const float want = expected[static_cast<std::size_t>(i * n + j)];
        // fp32_tolerance bounds the sum's error; the bias add and the result's own rounding
        // (done once, in double, by the reference) add up to an ulp of the result: with k = 1
        // and a bias near 1, that ulp is the whole difference.
        const float tol = fp32_tolerance(xi, wj, k) +
                          (rounds_x ? int16_rounding_bound(xi, wj, k) : 0.0f) +
                          2.0f * std::numeric_limits<float>::epsilon() * std::fabs(want);
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
      for (std::int64_t m : {1, 3, 7, 17, 33, 64, 100}) {
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

const std::vector<MatmulKernel>& every_kernel() {
  static const std::vector<MatmulKernel> all = {
      MatmulKernel::kDirect,   MatmulKernel::kPacked,    MatmulKernel::kBlasPanel,
      MatmulKernel::kRowGroup, MatmulKernel::kBroadcast, MatmulKernel::kBroadcastInt16};
  return all;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Q, K and V through one dispatch give what three matmul() calls give, bit for bit, whatever
// kernel and however the pool cuts the joined range.
TEST(MatmulTest, FusedOutputsEqualSeparateMatmuls) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 3);
  ThreadPool pool(3);
  const std::int64_t k = 96;
  const std::array<std::int64_t, 3> ns = {37, 5, 61};
  for (DType dtype : {DType::kQ4_1, DType::kQ8_0, DType::kF16}) {
    std::vector<std::vector<std::uint8_t>> bytes;
    std::vector<std::vector<float>> biases;
    for (std::int64_t n : ns) {
      bytes.push_back(random_weights(rng, dtype, n, k));
      biases.push_back(random_floats(rng, static_cast<std::size_t>(n)));
    }
    for (std::int64_t m : {1, 2, 4, 5, 16, 33, 65}) {
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
      for (MatmulKernel kernel : every_kernel()) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " kernel " +
                     std::to_string(static_cast<int>(kernel)));
        std::vector<std::vector<float>> fused(3), separate(3);
        std::vector<MatmulOutput> outputs;
        for (std::size_t t = 0; t < 3; ++t) {
          const TensorView w = dense_view(bytes[t].data(), dtype, ns[t], k);
          const float* bias = t == 1 ? nullptr : biases[t].data();
          fused[t].assign(static_cast<std::size_t>(m * ns[t]), -1.0f);
          separate[t].assign(static_cast<std::size_t>(m * ns[t]), -2.0f);
          outputs.push_back({.w = w, .bias = bias, .y = fused[t].data()});
          matmul(pool, x.data(), m, w, bias, separate[t].data(), kernel);
        }
        matmul_fused(pool, x.data(), m, outputs, kernel);
        for (std::size_t t = 0; t < 3; ++t) EXPECT_TRUE(bitwise_equal(fused[t], separate[t])) << t;
      }
    }
  }
}

// The broadcast kernel's x^T: whole 16 x 16 blocks go through registers, the k % 16 tail and the
// lanes past m are filled one by one; every element of xt is written (NaN-poisoned before).
TEST(MatmulTest, BroadcastTransposeFillsEveryColumn) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "the broadcast kernel needs AVX-512";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 6);
  for (std::int64_t m : {1, 13, 16, 17, 33, 64}) {
    for (std::int64_t k : {1, 15, 16, 17, 576, 1000}) {
      SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k));
      const std::int64_t vectors = (m + avx512::kColumnLanes - 1) / avx512::kColumnLanes;
      const std::int64_t width = vectors * avx512::kColumnLanes;
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
      std::vector<float> xt(static_cast<std::size_t>(k * width),
                            std::numeric_limits<float>::quiet_NaN());
      avx512::transpose_to_columns(x.data(), m, k, vectors, xt.data());
      for (std::int64_t c = 0; c < k; ++c) {
        for (std::int64_t i = 0; i < width; ++i) {
          const float want = i < m ? x[i * k + c] : 0.0f;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(xt[c * width + i]),
                    std::bit_cast<std::uint32_t>(want))
              << "column " << c << " lane " << i;
        }
      }
    }
  }
}

// The broadcast kernel's output row for a sequence does not depend on the other rows of the
// batch or on the thread count: row i of an m-row product equals the same row computed alone.
TEST(MatmulTest, BroadcastRowsDoNotDependOnBatchSize) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "kBroadcast falls back to kPacked without AVX-512";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 4);
  ThreadPool pool(3);
  ThreadPool single(1);
  const std::int64_t n = 53;
  for (const auto& [dtype, k] :
       {std::pair{DType::kQ4_1, std::int64_t{608}}, std::pair{DType::kQ8_0, std::int64_t{96}},
        std::pair{DType::kQ4_K, std::int64_t{512}}}) {
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    for (std::int64_t m : {2, 3, 4, 5, 7, 16, 17, 33, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m));
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
      std::vector<float> batched(static_cast<std::size_t>(m * n));
      matmul(pool, x.data(), m, w, nullptr, batched.data(), MatmulKernel::kBroadcast);
      for (std::int64_t i : {std::int64_t{0}, m / 2, m - 1}) {
        std::vector<float> alone(static_cast<std::size_t>(n));
        matmul(single, x.data() + i * k, 1, w, nullptr, alone.data(), MatmulKernel::kBroadcast);
        const std::vector<float> row(batched.begin() + i * n, batched.begin() + (i + 1) * n);
        EXPECT_TRUE(bitwise_equal(row, alone)) << "row " << i;
      }
    }
  }
}

// The broadcast kernel's contract, bit for bit: y[i, n] is one fp32 FMA chain over the columns
// in order, starting from 0, on the reference-decoded weights (then + bias). Covers the
// pipelined Q8_0/Q4_0/Q4_1 path and the generic decode-then-FMA path (F16, Q4_K).
TEST(MatmulTest, BroadcastIsAnInOrderFmaChain) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "kBroadcast falls back to kPacked without AVX-512";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 5);
  ThreadPool pool(2);
  for (const auto& [dtype, k] :
       {std::pair{DType::kQ4_1, std::int64_t{608}}, std::pair{DType::kQ4_0, std::int64_t{160}},
        std::pair{DType::kQ8_0, std::int64_t{544}}, std::pair{DType::kF16, std::int64_t{40}},
        std::pair{DType::kQ4_K, std::int64_t{512}}}) {
    for (std::int64_t m : {1, 5, 16, 33, 64}) {
      const std::int64_t n = m % 2 == 0 ? 31 : 50;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m));
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k, 3);
      const TensorView w = dense_view(bytes.data() + 3, dtype, n, k);
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
      const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
      std::vector<float> y(static_cast<std::size_t>(m * n));
      matmul(pool, x.data(), m, w, bias.data(), y.data(), MatmulKernel::kBroadcast);
      std::vector<float> row(static_cast<std::size_t>(k));
      std::vector<float> want(y.size());
      for (std::int64_t j = 0; j < n; ++j) {
        decode_row(w, j, 0, k, row.data());
        for (std::int64_t i = 0; i < m; ++i) {
          float sum = 0.0f;
          for (std::int64_t c = 0; c < k; ++c) sum = std::fma(row[c], x[i * k + c], sum);
          want[static_cast<std::size_t>(i * n + j)] = sum + bias[j];
        }
      }
      EXPECT_TRUE(bitwise_equal(y, want));
    }
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
