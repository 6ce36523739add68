// Interleaved weights (interleaved_rows.h) in the matmul: the decode kernels (AVX-512 VNNI,
// matmul_interleaved_avx512.h, and AVX2, matmul_interleaved_avx2.h, under
// PAGODA_CPU_ISA=avx2) are the int16 contract bit for bit, as the row-major kernels are,
// at every row count of x it takes and at weight row counts that leave panels part empty; every
// other kernel, reading deinterleaved rows, gives what it gives on the row-major matrix.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"
#include "int16_contract.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::activations;
using testing::bitwise_equal;
using testing::random_floats;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

struct Case {
  DType dtype;
  std::int64_t k;
};

// One-block types at K not a multiple of 64 (an odd block count), K-quants at 1 and 3
// super-blocks.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {DType::kQ8_0, 96},  {DType::kQ8_0, 544}, {DType::kQ4_0, 160}, {DType::kQ4_0, 32},
      {DType::kQ4_1, 224}, {DType::kQ5_0, 96},  {DType::kQ5_1, 160}, {DType::kQ4_K, 256},
      {DType::kQ4_K, 768}, {DType::kQ5_K, 512}, {DType::kQ6_K, 256}, {DType::kQ6_K, 768}};
  return all;
}

// With int16 and int8 activations (the AVX-512 kernel's own int8 path, cpu_int8_activations()).
TEST(MatmulInterleavedTest, DecodeKernelIsTheContractBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "the interleaved kernels need AVX2";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 41);
  ThreadPool pool(3);
  const CpuActivations asked = cpu_activations();
  for (const CpuActivations codes : {CpuActivations::kInt16, CpuActivations::kInt8}) {
    set_cpu_activations(codes);
    const float code_max = cpu_activation_code_max();
    for (const Case& c : cases()) {
      for (std::int64_t n : {1, 15, 16, 17, 47}) {
        const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k);
        const TensorView rows = dense_view(bytes.data(), c.dtype, n, c.k);
        const InterleavedMatrix panels = interleave_rows(rows);
        for (std::int64_t m = 1; m <= 8; ++m) {
          SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " k=" + std::to_string(c.k) +
                       " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                       " code max=" + std::to_string(code_max));
          const std::vector<float> x = activations(rng, m, c.k);
          const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
          std::vector<float> want(static_cast<std::size_t>(m * n));
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
              want[static_cast<std::size_t>(i * n + j)] =
                  testing::contract(c.dtype, x.data() + i * c.k, rows.row(j), c.k, code_max) +
                  bias[j];
            }
          }
          std::vector<float> y(static_cast<std::size_t>(m * n), -1.0f);
          matmul(pool, x.data(), m, panels.view, bias.data(), y.data(), MatmulKernel::kDirectInt16);
          EXPECT_TRUE(bitwise_equal(y, want));
        }
      }
    }
  }
  set_cpu_activations(asked);
}

// A fused call mixing an interleaved and a row-major weight: each output as alone.
TEST(MatmulInterleavedTest, FusedWithRowMajorWeights) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "the interleaved kernels need AVX2";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 42);
  ThreadPool pool(2);
  const std::int64_t k = 512;
  const std::int64_t m = 3;
  const std::vector<std::uint8_t> a = random_weights(rng, DType::kQ4_K, 40, k);
  const std::vector<std::uint8_t> b = random_weights(rng, DType::kQ6_K, 24, k);
  const TensorView wa = dense_view(a.data(), DType::kQ4_K, 40, k);
  const TensorView wb = dense_view(b.data(), DType::kQ6_K, 24, k);
  const InterleavedMatrix pa = interleave_rows(wa);
  const std::vector<float> x = activations(rng, m, k);
  std::vector<float> want_a(m * 40), want_b(m * 24), got_a(m * 40), got_b(m * 24);
  matmul(pool, x.data(), m, wa, nullptr, want_a.data(), MatmulKernel::kDirectInt16);
  matmul(pool, x.data(), m, wb, nullptr, want_b.data(), MatmulKernel::kDirectInt16);
  const MatmulOutput outputs[] = {{.w = pa.view, .bias = nullptr, .y = got_a.data()},
                                  {.w = wb, .bias = nullptr, .y = got_b.data()}};
  matmul_fused(pool, x.data(), m, outputs, MatmulKernel::kAuto);
  EXPECT_TRUE(bitwise_equal(got_a, want_a));
  EXPECT_TRUE(bitwise_equal(got_b, want_b));
}

// Every kernel takes interleaved weights (on any CPU: those that read rows deinterleave them),
// with the row-major matrix's results.
TEST(MatmulInterleavedTest, EveryKernelAsOnRows) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 43);
  ThreadPool pool(2);
  const std::int64_t n = 300;  // past one 256-row chunk of the deinterleaving path
  for (const Case& c : {Case{DType::kQ4_0, 96}, Case{DType::kQ6_K, 256}}) {
    const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k);
    const TensorView rows = dense_view(bytes.data(), c.dtype, n, c.k);
    const InterleavedMatrix panels = interleave_rows(rows);
    const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
    for (MatmulKernel kernel :
         {MatmulKernel::kAuto, MatmulKernel::kDirect, MatmulKernel::kPacked,
          MatmulKernel::kRowGroup, MatmulKernel::kBroadcast, MatmulKernel::kBlasPanel,
          MatmulKernel::kDirectInt16, MatmulKernel::kBroadcastInt16}) {
      for (std::int64_t m : {1, 5, 20}) {
        SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " kernel=" +
                     std::to_string(static_cast<int>(kernel)) + " m=" + std::to_string(m));
        const std::vector<float> x = activations(rng, m, c.k);
        std::vector<float> want(static_cast<std::size_t>(m * n), -1.0f);
        std::vector<float> got(static_cast<std::size_t>(m * n), -2.0f);
        matmul(pool, x.data(), m, rows, bias.data(), want.data(), kernel);
        matmul(pool, x.data(), m, panels.view, bias.data(), got.data(), kernel);
        EXPECT_TRUE(bitwise_equal(got, want));
      }
    }
    std::vector<float> want(static_cast<std::size_t>(2 * n)), got(want.size());
    const std::vector<float> x = activations(rng, 2, c.k);
    matmul_reference(x.data(), 2, rows, bias.data(), want.data());
    matmul_reference(x.data(), 2, panels.view, bias.data(), got.data());
    EXPECT_TRUE(bitwise_equal(got, want));
  }
}

}  // namespace
}  // namespace pagoda::cpu
