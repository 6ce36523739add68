// The AVX2 int16-activation kernels (matmul_int16_avx2.h): bit for bit the contract's scalar
// transcription (int16_contract.h) for every int16_decodes() type, called directly and through
// matmul(); bit for bit the AVX-512 kernels where the CPU has both; rows independent of the batch;
// non-finite rows isolated.
#include "backend/cpu/matmul_int16_avx2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_int16_amx.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/tensor_view.h"
#include "backend/cpu/thread_pool.h"
#include "int16_contract.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::activations;
using testing::bitwise_equal;
using testing::contract;
using testing::random_floats;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

std::vector<float> want_contract(DType dtype, const std::vector<float>& x, std::int64_t m,
                                 const TensorView& w) {
  const std::int64_t k = w.num_cols;
  std::vector<float> want(static_cast<std::size_t>(m * w.num_rows));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < w.num_rows; ++j) {
      want[static_cast<std::size_t>(i * w.num_rows + j)] =
          contract(dtype, x.data() + i * k, w.row(j), k);
    }
  }
  return want;
}

// avx2::int16_direct over all rows (m <= 8), in one call.
std::vector<float> run_direct(const std::vector<float>& x, std::int64_t m, const TensorView& w) {
  const std::int64_t k = w.num_cols;
  const std::int64_t nb = k / avx2::kInt16Block;
  std::vector<std::int16_t> q(static_cast<std::size_t>(m * k));
  std::vector<float> scales(static_cast<std::size_t>(m * nb));
  std::vector<float> sums(scales.size());
  std::vector<std::int32_t> qsums(scales.size());
  avx2::quantize_rows_int16(x.data(), m, k, q.data(), scales.data(), sums.data(), qsums.data());
  std::vector<float> y(static_cast<std::size_t>(m * w.num_rows), -1.0f);
  avx2::int16_direct(w.dtype, q.data(), scales.data(), sums.data(), m, k, w.row(0), w.row_stride, 0,
                     w.num_rows, y.data(), w.num_rows);
  return y;
}

// avx2::int16_tile over all rows: pieces of up to kInt16PieceRows rows of x, tiles of weight rows.
std::vector<float> run_tile(const std::vector<float>& x, std::int64_t m, const TensorView& w) {
  const std::int64_t k = w.num_cols;
  const std::int64_t n = w.num_rows;
  std::vector<float> y(static_cast<std::size_t>(m * n), -1.0f);
  for (std::int64_t r0 = 0; r0 < m; r0 += avx2::kInt16PieceRows) {
    const std::int64_t rows = std::min(avx2::kInt16PieceRows, m - r0);
    const std::int64_t vectors = (rows + avx2::kInt16Lanes - 1) / avx2::kInt16Lanes;
    const std::int64_t width = vectors * avx2::kInt16Lanes;
    std::vector<std::int32_t> pairs(static_cast<std::size_t>(k / 2 * width));
    std::vector<float> scales(static_cast<std::size_t>(k / avx2::kInt16Block * width));
    std::vector<float> sums(scales.size());
    avx2::quantize_columns_int16(x.data() + r0 * k, rows, k, vectors, pairs.data(), scales.data(),
                                 sums.data());
    const std::int64_t tile_rows = avx2::int16_tile_rows(vectors);
    std::vector<float> acc(static_cast<std::size_t>(tile_rows * width));
    for (std::int64_t n0 = 0; n0 < n; n0 += tile_rows) {
      const std::int64_t count = std::min(tile_rows, n - n0);
      const std::int64_t next_rows = std::min(tile_rows, n - n0 - count);
      std::fill(acc.begin(), acc.end(), 0.0f);
      avx2::int16_tile(w.dtype, pairs.data(), scales.data(), sums.data(), vectors, k, w.row(n0),
                       w.row_stride, count, next_rows > 0 ? w.row(n0 + count) : nullptr, next_rows,
                       acc.data());
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t r = 0; r < count; ++r) {
          y[static_cast<std::size_t>((r0 + i) * n + n0 + r)] =
              acc[static_cast<std::size_t>(r * width + i)];
        }
      }
    }
  }
  return y;
}

// Every contract type; K-quants one to three 256-column super-blocks.
const std::vector<std::pair<DType, std::int64_t>>& weight_cases() {
  static const std::vector<std::pair<DType, std::int64_t>> all = {
      {DType::kQ4_1, 32},  {DType::kQ4_1, 608}, {DType::kQ4_0, 160}, {DType::kQ8_0, 544},
      {DType::kQ8_0, 64},  {DType::kQ5_0, 96},  {DType::kQ5_1, 224}, {DType::kQ4_K, 256},
      {DType::kQ4_K, 768}, {DType::kQ5_K, 512}, {DType::kQ6_K, 256}, {DType::kQ6_K, 768},
      {DType::kQ3_K, 512}, {DType::kQ2_K, 256}, {DType::kQ2_K, 768}};
  return all;
}

class MatmulInt16Avx2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) GTEST_SKIP() << "the AVX2 int16 kernels need AVX2";
  }
};

TEST_F(MatmulInt16Avx2Test, EveryContractTypeIsCovered) {
  for (DType dtype : testing::kContractTypes) {
    bool covered = false;
    for (const auto& c : weight_cases()) covered |= c.first == dtype;
    EXPECT_TRUE(covered) << dtype_name(dtype);
    EXPECT_TRUE(int16_decodes(dtype)) << dtype_name(dtype);
  }
}

// Both kernels called directly; weight row counts that leave short groups of 8 and short tiles
// (53 = 6 x 8 + 5 = 4 x 12 + 5), or fill neither (7); rows of x that leave lanes empty.
TEST_F(MatmulInt16Avx2Test, KernelsAreTheContractBitForBit) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 40);
  for (const auto& [dtype, k] : weight_cases()) {
    for (std::int64_t m : {1, 2, 3, 4, 7, 8, 9, 12, 16, 17, 33}) {
      const std::int64_t n = m % 2 == 0 || m == 3 ? 53 : 7;
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k, 1);
      const TensorView w = dense_view(bytes.data() + 1, dtype, n, k);
      const std::vector<float> x = activations(rng, m, k);
      const std::vector<float> want = want_contract(dtype, x, m, w);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k) +
                   " m=" + std::to_string(m) + " n=" + std::to_string(n));
      if (m <= avx2::kInt16DirectMaxRows) {
        EXPECT_TRUE(bitwise_equal(run_direct(x, m, w), want));
      }
      EXPECT_TRUE(bitwise_equal(run_tile(x, m, w), want));
    }
  }
}

// Through matmul(): kAuto and both int16 kernels, whichever ISA runs them (the AVX2 kernels
// under PAGODA_CPU_ISA=avx2 or avx512, cpu_ops_test_avx2 / _avx512), with a bias.
TEST_F(MatmulInt16Avx2Test, MatmulIsTheContractBitForBit) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 41);
  ThreadPool pool(3);
  std::vector<MatmulKernel> kernels = {MatmulKernel::kDirectInt16, MatmulKernel::kBroadcastInt16};
  if (cpu_int16_activations()) kernels.push_back(MatmulKernel::kAuto);
  for (const auto& [dtype, k] : weight_cases()) {
    for (std::int64_t m : {1, 3, 8, 9, 17, 33}) {
      const std::int64_t n = 29;
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
      const TensorView w = dense_view(bytes.data(), dtype, n, k);
      const std::vector<float> x = activations(rng, m, k);
      const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
      std::vector<float> want = want_contract(dtype, x, m, w);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) want[static_cast<std::size_t>(i * n + j)] += bias[j];
      }
      for (MatmulKernel kernel : kernels) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m) +
                     " kernel=" + std::to_string(static_cast<int>(kernel)));
        std::vector<float> y(static_cast<std::size_t>(m * n), -1.0f);
        matmul(pool, x.data(), m, w, bias.data(), y.data(), kernel);
        EXPECT_TRUE(bitwise_equal(y, want));
      }
    }
  }
}

// A row's result is the same alone and in any batch, through either kernel.
TEST_F(MatmulInt16Avx2Test, RowsDoNotDependOnTheBatch) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 42);
  for (DType dtype : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const std::int64_t k = 512;
    const std::int64_t n = 37;
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    const std::int64_t m = 21;
    const std::vector<float> x = activations(rng, m, k);
    const std::vector<float> batch = run_tile(x, m, w);
    for (std::int64_t i = 0; i < m; ++i) {
      const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
      const std::vector<float> alone = run_direct(row, 1, w);
      const std::vector<float> in_batch(batch.begin() + i * n, batch.begin() + (i + 1) * n);
      EXPECT_TRUE(bitwise_equal(alone, in_batch)) << dtype_name(dtype) << " row " << i;
    }
  }
}

// A non-finite x makes its own row NaN and leaves the others as they are alone.
TEST_F(MatmulInt16Avx2Test, NonFiniteRowsStayIsolated) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 43);
  const std::int64_t k = 256;
  const std::int64_t n = 19;
  for (DType dtype : {DType::kQ4_1, DType::kQ2_K}) {
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    for (std::int64_t m : {5, 11}) {
      std::vector<float> x = activations(rng, m, k);
      const std::vector<float> clean = want_contract(dtype, x, m, w);
      x[static_cast<std::size_t>(1 * k + 40)] = std::numeric_limits<float>::infinity();
      x[static_cast<std::size_t>(3 * k + 200)] = std::numeric_limits<float>::quiet_NaN();
      std::vector<std::vector<float>> runs = {run_tile(x, m, w)};
      if (m <= avx2::kInt16DirectMaxRows) runs.push_back(run_direct(x, m, w));
      for (const std::vector<float>& y : runs) {
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            const float got = y[static_cast<std::size_t>(i * n + j)];
            if (i == 1 || i == 3) {
              EXPECT_TRUE(std::isnan(got)) << "row " << i;
            } else {
              EXPECT_EQ(got, clean[static_cast<std::size_t>(i * n + j)]) << "row " << i;
            }
          }
        }
      }
    }
  }
}

// Where the CPU has both (called directly, whatever PAGODA_CPU_ISA says): the same q, scales and
// sums, and the same outputs as the AVX-512 VNNI kernels.
TEST(MatmulInt16Avx2VsAvx512Test, BitwiseEqual) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
    GTEST_SKIP() << "needs AVX-512 VNNI";
  }
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 44);
  for (const auto& [dtype, k] : weight_cases()) {
    const std::int64_t n = 45;
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView w = dense_view(bytes.data(), dtype, n, k);
    for (std::int64_t m : {1, 4, 8}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m));
      std::vector<float> x = activations(rng, m, k);
      x[static_cast<std::size_t>(k / 2)] = std::numeric_limits<float>::infinity();
      const std::int64_t nb = k / avx2::kInt16Block;
      std::vector<std::int16_t> q2(static_cast<std::size_t>(m * k)), q5(q2.size());
      std::vector<float> s2(static_cast<std::size_t>(m * nb)), s5(s2.size()), ss2(s2.size()),
          ss5(s2.size());
      std::vector<std::int32_t> qs2(s2.size()), qs5(s2.size());
      avx2::quantize_rows_int16(x.data(), m, k, q2.data(), s2.data(), ss2.data(), qs2.data());
      avx512::quantize_rows_int16(x.data(), m, k, q5.data(), s5.data(), ss5.data(), qs5.data());
      EXPECT_EQ(q2, q5);
      EXPECT_EQ(qs2, qs5);
      EXPECT_EQ(0, std::memcmp(s2.data(), s5.data(), s2.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(ss2.data(), ss5.data(), ss2.size() * sizeof(float)));
      std::vector<float> y5(static_cast<std::size_t>(m * n), -1.0f);
      avx512::int16_direct(dtype, q5.data(), s5.data(), ss5.data(), qs5.data(), m, k, w.row(0),
                           w.row_stride, 0, n, y5.data(), n);
      EXPECT_TRUE(bitwise_equal(run_direct(x, m, w), y5));
      EXPECT_TRUE(bitwise_equal(run_tile(x, m, w), y5));
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu

namespace pagoda::cpu {
namespace {

// The AMX tiles (matmul_int16_amx.h) against the scalar contract, called directly: rows of x that
// fill one and a bit, two, two and a bit, and four and a bit 8-row tiles; weight rows that fill
// one 16-row tile, leave the second of a 32-row pass empty (16) or short (45), or take several
// passes (80); every type they take; through matmul() (kBroadcastInt16, which picks them on an
// AMX CPU) with two threads as well. The two-scale types are refused and stay on the AVX-512
// tile.
TEST(MatmulInt16AmxTest, TilesAreTheContractBitForBit) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "needs AMX-INT8 (and the tile state from Linux)";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 46);
  ThreadPool pool(2);
  for (DType two_scales : {DType::kQ2_K, DType::kQ3_K, DType::kQ6_K}) {
    EXPECT_FALSE(amx::takes(two_scales)) << dtype_name(two_scales);
  }
  for (DType one_scale : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                          DType::kQ4_K, DType::kQ5_K}) {
    EXPECT_TRUE(amx::takes(one_scale)) << dtype_name(one_scale);
  }
  for (const auto& [dtype, k] : weight_cases()) {
    if (!amx::takes(dtype)) continue;
    for (std::int64_t n : {16, 45, 80}) {
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
      const TensorView w = dense_view(bytes.data(), dtype, n, k);
      for (std::int64_t m : {9, 16, 17, 33}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k) +
                     " n=" + std::to_string(n) + " m=" + std::to_string(m));
        const std::vector<float> x = activations(rng, m, k);
        const std::vector<float> want = want_contract(dtype, x, m, w);
        const std::int64_t nb = k / avx512::kInt16Block;
        const std::int64_t m_pad = (m + amx::kTileRows - 1) / amx::kTileRows * amx::kTileRows;
        std::vector<std::int16_t> q(static_cast<std::size_t>(m_pad * k), 0);
        std::vector<float> scales(static_cast<std::size_t>(m_pad * nb), 0.0f);
        std::vector<float> sums(scales.size(), 0.0f);
        std::vector<std::int32_t> qsums(scales.size());
        avx512::quantize_rows_int16(x.data(), m, k, q.data(), scales.data(), sums.data(),
                                    qsums.data());
        std::vector<std::int8_t> split(2 * q.size());
        amx::split_bytes(q.data(), m_pad, k, split.data());
        std::vector<float> direct(static_cast<std::size_t>(m * n), -1.0f);
        amx::int16_tiles(dtype, split.data(), scales.data(), sums.data(), m, k, w.row(0),
                         w.row_stride, 0, n, direct.data(), n);
        EXPECT_TRUE(bitwise_equal(direct, want));
        std::vector<float> through(static_cast<std::size_t>(m * n), -1.0f);
        matmul(pool, x.data(), m, w, nullptr, through.data(), MatmulKernel::kBroadcastInt16);
        EXPECT_TRUE(bitwise_equal(through, want));
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
