// The int16-activation kernels (kDirectInt16 and kBroadcastInt16, matmul_int16_avx512.h): bit for
// bit the header's contract, transcribed here in scalar code; within its stated rounding bound of
// the double reference; rows independent of the batch and of which kernel ran them; non-finite
// rows isolated; and a clean fallback to the fp32 kernels for the weights and CPUs they do not
// take.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/row_decoder.h"
#include "int16_contract.h"
#include "matmul_tolerance.h"
#include "model/dequantize.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::activations;
using testing::bitwise_equal;
using testing::contract;
using testing::fp32_tolerance;
using testing::int16_rounding_bound;
using testing::random_floats;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

// The contract's reading of each layout (int16_contract.h, written from the GGUF formats) gives
// the reference dequantizer's weights exactly: scale_t * qw[c] + min_t, rounded as the reference
// rounds. Any misplaced bit, scale or sign shows as a different weight.
TEST(Int16ContractTest, BlocksAreTheReferenceWeights) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 10);
  const std::int64_t rows = 7;
  const std::int64_t k = 768;
  for (DType dtype : testing::kContractTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, rows, k);
    const TensorView w = dense_view(bytes.data(), dtype, rows, k);
    std::vector<float> want(static_cast<std::size_t>(k));
    int zero_scales = 0;
    for (std::int64_t n = 0; n < rows; ++n) {
      decode_row(w, n, 0, k, want.data());
      for (std::int64_t b = 0; b < k / testing::kContractBlock; ++b) {
        const testing::ContractBlock block = testing::contract_block(dtype, w.row(n), b);
        const int width = testing::kContractBlock / block.sub_blocks;
        for (int c = 0; c < testing::kContractBlock; ++c) {
          const int t = c / width;
          const float product = block.scale[t] * static_cast<float>(block.q[c]);
          const float got = block.has_min ? product + block.min[t] : product;
          const float expected = want[static_cast<std::size_t>(b * testing::kContractBlock + c)];
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(expected))
              << "row " << n << " column " << b * testing::kContractBlock + c;
        }
        for (int t = 0; t < block.sub_blocks; ++t) zero_scales += block.scale[t] == 0.0f;
      }
    }
    if (dtype_info(dtype).block_size == 256) {
      EXPECT_GT(zero_scales, 0) << "random_weights";
    }
  }
}

class MatmulInt16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) {
      GTEST_SKIP() << "the int16 kernels need AVX2 (the fallback is FallsBackToFp32)";
    }
  }
};

const std::vector<std::pair<DType, std::int64_t>>& weight_cases() {
  // K-quants: one to three 256-column super-blocks.
  static const std::vector<std::pair<DType, std::int64_t>> all = {
      {DType::kQ4_1, 32},  {DType::kQ4_1, 608}, {DType::kQ4_0, 160}, {DType::kQ8_0, 544},
      {DType::kQ5_0, 96},  {DType::kQ5_1, 224}, {DType::kQ4_K, 256}, {DType::kQ4_K, 768},
      {DType::kQ5_K, 512}, {DType::kQ6_K, 256}, {DType::kQ6_K, 768}, {DType::kQ3_K, 512},
      {DType::kQ2_K, 256}, {DType::kQ2_K, 768}};
  return all;
}

// Both kernels, and kAuto where it picks them, at 1-8 rows (the direct kernel's), one and two
// column vectors, and past 32 rows (pieces); 13, 17 and 33 rows leave lanes empty; 53 weight
// rows leave a short tile and a short group of 16, 7 rows fill neither. With int8 activations
// (codes up to 127) too: the int16 kernels take them as they are, the int8 tile
// (matmul_int8_avx512.h) runs the broadcast kernel's rows on AVX-512 VNNI.
class MatmulActivationCodesTest : public MatmulInt16Test,
                                  public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    MatmulInt16Test::SetUp();
    set_cpu_activations(GetParam() ? CpuActivations::kInt8 : CpuActivations::kInt16);
  }
  void TearDown() override { set_cpu_activations(asked_); }

 private:
  const CpuActivations asked_ = cpu_activations();
};

INSTANTIATE_TEST_SUITE_P(Int16AndInt8, MatmulActivationCodesTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Int8" : "Int16"; });

TEST_P(MatmulActivationCodesTest, IsTheContractBitForBit) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 11);
  ThreadPool pool(3);
  ASSERT_EQ(cpu_int8_activations(), GetParam());
  const float code_max = cpu_activation_code_max();
  std::vector<MatmulKernel> kernels = {MatmulKernel::kDirectInt16, MatmulKernel::kBroadcastInt16};
  if (cpu_int16_activations()) kernels.push_back(MatmulKernel::kAuto);
  for (const auto& [dtype, k] : weight_cases()) {
    for (std::int64_t m : {1, 2, 3, 5, 8, 9, 12, 13, 16, 17, 31, 33, 48, 64, 97}) {
      const std::int64_t n = m % 2 == 0 || m == 3 ? 53 : 7;
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k, 1);
      const TensorView w = dense_view(bytes.data() + 1, dtype, n, k);
      const std::vector<float> x = activations(rng, m, k);
      const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
      std::vector<float> want(static_cast<std::size_t>(m * n));
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          want[static_cast<std::size_t>(i * n + j)] =
              contract(dtype, x.data() + i * k, w.row(j), k, code_max) + bias[j];
        }
      }
      for (MatmulKernel kernel : kernels) {
        // The AVX-512 direct kernel both ways: VNNI byte products on split x (the default) and
        // vpmaddwd on int16 x.
        for (const bool vnni : {true, false}) {
          if (!vnni && (kernel == MatmulKernel::kBroadcastInt16 || !cpu_has_avx512_vnni()))
            continue;
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k) + " m=" +
                       std::to_string(m) + " kernel=" + std::to_string(static_cast<int>(kernel)) +
                       (vnni ? "" : " vpmaddwd"));
          set_cpu_int16_direct_vnni(vnni);
          std::vector<float> y(static_cast<std::size_t>(m * n), -1.0f);
          matmul(pool, x.data(), m, w, bias.data(), y.data(), kernel);
          EXPECT_TRUE(bitwise_equal(y, want));
        }
        set_cpu_int16_direct_vnni(true);
      }
    }
  }
}

// The precision the header states: within the double reference's fp32 tolerance plus half an
// int16 step of each block's largest |x| per weight.
TEST_F(MatmulInt16Test, StaysWithinTheRoundingBoundOfTheReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 12);
  ThreadPool pool(2);
  for (const auto& [dtype, k] : weight_cases()) {
    const std::int64_t m = 16;
    const std::int64_t n = 37;
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k));
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    const std::vector<float> x = activations(rng, m, k);
    std::vector<float> y(static_cast<std::size_t>(m * n));
    std::vector<float> expected(y.size());
    matmul(pool, x.data(), m, w, nullptr, y.data(), MatmulKernel::kBroadcastInt16);
    matmul_reference(x.data(), m, w, nullptr, expected.data());
    std::vector<float> row(static_cast<std::size_t>(k));
    for (std::int64_t j = 0; j < n; ++j) {
      decode_row(w, j, 0, k, row.data());
      for (std::int64_t i = 0; i < m; ++i) {
        const float* xi = x.data() + i * k;
        const float tol =
            fp32_tolerance(xi, row.data(), k) + int16_rounding_bound(xi, row.data(), k);
        const std::size_t at = static_cast<std::size_t>(i * n + j);
        ASSERT_LE(std::fabs(y[at] - expected[at]), tol) << "y[" << i << ", " << j << "]";
      }
    }
  }
}

// A row's outputs are those it gets alone (from the direct kernel), whatever else shares the call
// and however many threads split it; a row with an infinite or NaN input gives NaN and leaves the
// others alone.
TEST_F(MatmulInt16Test, RowsDoNotDependOnTheBatch) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 13);
  ThreadPool pool(3);
  ThreadPool single(1);
  const std::int64_t n = 29;
  for (const auto& [dtype, k] : weight_cases()) {
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    for (std::int64_t m : {2, 3, 7, 12, 16, 17, 40, 64, 80}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m));
      std::vector<float> x = activations(rng, m, k);
      x[static_cast<std::size_t>(1 * k + k / 2)] = std::numeric_limits<float>::infinity();
      x[static_cast<std::size_t>((m - 2) * k)] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> batched(static_cast<std::size_t>(m * n));
      matmul(pool, x.data(), m, w, nullptr, batched.data(),
             m <= avx512::kInt16DirectMaxRows ? MatmulKernel::kDirectInt16
                                              : MatmulKernel::kBroadcastInt16);
      for (std::int64_t i = 0; i < m; ++i) {
        const std::vector<float> got(batched.begin() + i * n, batched.begin() + (i + 1) * n);
        if (i == 1 || i == m - 2) {
          for (float v : got) ASSERT_TRUE(std::isnan(v)) << "row " << i;
          continue;
        }
        std::vector<float> alone(static_cast<std::size_t>(n));
        matmul(single, x.data() + i * k, 1, w, nullptr, alone.data(), MatmulKernel::kDirectInt16);
        ASSERT_TRUE(bitwise_equal(got, alone)) << "row " << i;
      }
    }
  }
}

// An all-zero row has no scale to take: its outputs are exactly the bias.
TEST_F(MatmulInt16Test, ZeroRowGivesTheBias) {
  ThreadPool pool(2);
  std::mt19937_64 rng(test_seed() + 14);
  const std::int64_t m = 16;
  const std::int64_t n = 11;
  const std::int64_t k = 96;
  const std::vector<std::uint8_t> bytes = random_weights(rng, DType::kQ4_1, n, k);
  const TensorView w = dense_view(bytes.data(), DType::kQ4_1, n, k);
  std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
  std::fill(x.begin() + 3 * k, x.begin() + 4 * k, 0.0f);
  const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
  for (MatmulKernel kernel : {MatmulKernel::kDirectInt16, MatmulKernel::kBroadcastInt16}) {
    const std::int64_t rows = kernel == MatmulKernel::kDirectInt16 ? 3 : m;
    std::vector<float> y(static_cast<std::size_t>(rows * n));
    // Row 2 of the direct call is row 3 of x.
    const std::int64_t zero_row = kernel == MatmulKernel::kDirectInt16 ? 2 : 3;
    const float* first = x.data() + (3 - zero_row) * k;
    matmul(pool, first, rows, w, bias.data(), y.data(), kernel);
    for (std::int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(y[static_cast<std::size_t>(zero_row * n + j)], bias[j]) << static_cast<int>(kernel);
    }
  }
}

// Weights the kernels do not take (F16, BF16, or any of a fused set), and CPUs without VNNI
// (PAGODA_CPU_ISA=avx512 runs this on the avx512 tier), get the fp32 kernel's exact results.
TEST(MatmulInt16FallbackTest, FallsBackToFp32) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 15);
  ThreadPool pool(2);
  const std::int64_t k = 256;
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<TensorView> views;
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kQ4_1}) {
    bytes.push_back(random_weights(rng, dtype, 19, k));
    views.push_back(dense_view(bytes.back().data(), dtype, 19, k));
  }
  for (std::int64_t m : {2, 16}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
    const MatmulKernel fp32_kernel = fp32_matmul_kernel_for(m);
    auto run = [&](std::size_t first, std::size_t count, MatmulKernel kernel) {
      std::vector<std::vector<float>> ys(count,
                                         std::vector<float>(static_cast<std::size_t>(m * 19)));
      std::vector<MatmulOutput> outputs;
      for (std::size_t t = 0; t < count; ++t) {
        outputs.push_back({.w = views[first + t], .y = ys[t].data()});
      }
      matmul_fused(pool, x.data(), m, outputs, kernel);
      return ys;
    };
    for (MatmulKernel int16_kernel : {MatmulKernel::kDirectInt16, MatmulKernel::kBroadcastInt16}) {
      // Alone, F16 and BF16 fall back; fused with them, so does the Q4_1 weight.
      for (const auto& [first, count] :
           {std::pair<std::size_t, std::size_t>{0, 1}, {1, 1}, {0, 3}}) {
        const auto int16 = run(first, count, int16_kernel);
        const auto fp32 = run(first, count, fp32_kernel);
        for (std::size_t t = 0; t < count; ++t) EXPECT_TRUE(bitwise_equal(int16[t], fp32[t])) << t;
      }
      // Q4_1 alone takes the int16 kernels where the CPU has AVX2 (matmul_int16_avx2.h).
      const auto int16 = run(2, 1, int16_kernel);
      const auto fp32 = run(2, 1, fp32_kernel);
      EXPECT_EQ(bitwise_equal(int16[0], fp32[0]), !cpu_has_avx2());
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
