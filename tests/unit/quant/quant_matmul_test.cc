// Q4_Z and F8_S weights through every CPU matmul kernel family, against the fp32 product of the
// same dequantized weights (matmul_reference: reference dequantizer, double accumulation), so
// only the kernels' own error is measured, not quantization error.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/row_decoder.h"
#include "backend/cpu/thread_pool.h"
#include "model/dequantize.h"
#include "model/model_files.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"

namespace pagoda::quant {
namespace {

std::vector<float> random_floats(std::mt19937_64& rng, std::size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

ModelTensor f32_tensor(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  return ModelTensor{"w",
                     DType::kF32,
                     {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)},
                     std::span(reinterpret_cast<const std::uint8_t*>(values.data()),
                               values.size() * sizeof(float))};
}

// The weights are decoded bit-identically by every path (DecodeMatchesReference), so the
// kernels differ from the reference only in fp32 summation order: the error of K products is at
// most ~K * eps * sum|x_i w_i| and about sqrt(K) * eps * sum|x_i w_i| for random rounding.
// 2e-6 * sqrt(K) (~16 eps * sqrt(K)) leaves room for blocked partial sums and catches a wrong
// element, scale, zero or permutation (each moves the result by ~|x_i w_i|, far above it).
float tolerance(const float* x, const float* w_row, const std::int32_t* perm, std::int64_t k) {
  double magnitude = 0.0;
  for (std::int64_t j = 0; j < k; ++j) {
    magnitude += std::fabs(x[perm != nullptr ? perm[j] : j]) * std::fabs(w_row[j]);
  }
  return static_cast<float>(2e-6 * std::sqrt(static_cast<double>(k)) * magnitude + 1e-6);
}

void expect_kernels_match(cpu::ThreadPool& pool, std::mt19937_64& rng, const QuantizedMatrix& q) {
  cpu::TensorView w = cpu::dense_view(q.bytes.data(), q.dtype, q.rows, q.cols);
  if (!q.input_permutation.empty()) w.input_permutation = q.input_permutation.data();
  const std::int64_t n = q.rows;
  const std::int64_t k = q.cols;
  std::vector<float> w_rows(static_cast<std::size_t>(n * k));
  for (std::int64_t j = 0; j < n; ++j) cpu::decode_row(w, j, 0, k, w_rows.data() + j * k);
  const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n), 1.0f);
  for (const std::int64_t m : {1, 7, 16, 33, 64, 257}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k), 1.0f);
    std::vector<float> expected(static_cast<std::size_t>(m * n));
    cpu::matmul_reference(x.data(), m, w, bias.data(), expected.data());
    for (const cpu::MatmulKernel kernel :
         {cpu::MatmulKernel::kAuto, cpu::MatmulKernel::kDirect, cpu::MatmulKernel::kPacked,
          cpu::MatmulKernel::kBlasPanel, cpu::MatmulKernel::kRowGroup,
          cpu::MatmulKernel::kBroadcast}) {
      SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
      std::vector<float> y(static_cast<std::size_t>(m * n),
                           std::numeric_limits<float>::quiet_NaN());
      cpu::matmul(pool, x.data(), m, w, bias.data(), y.data(), kernel);
      int failures = 0;
      for (std::int64_t i = 0; i < m && failures < 5; ++i) {
        for (std::int64_t j = 0; j < n && failures < 5; ++j) {
          const float tol =
              tolerance(x.data() + i * k, w_rows.data() + j * k, w.input_permutation, k) +
              std::fabs(bias[j]) * 1e-6f;
          const float got = y[static_cast<std::size_t>(i * n + j)];
          const float want = expected[static_cast<std::size_t>(i * n + j)];
          if (!(std::fabs(got - want) <= tol)) {
            ++failures;
            ADD_FAILURE() << "y[" << i << ", " << j << "] = " << got << ", want " << want
                          << " (tolerance " << tol << ")";
          }
        }
      }
    }
  }
}

class QuantMatmul : public ::testing::Test {
 protected:
  cpu::ThreadPool pool_{3};
  std::mt19937_64 rng_{0x5eed1234};
};

// Every group size: 32, 64, 128 (with a 64-wide tail group at K = 576) and per channel.
TEST_F(QuantMatmul, Q4ZEveryGroupSize) {
  constexpr std::int64_t kRows = 37;
  for (const std::int64_t k : {96, 576}) {
    const std::vector<float> values =
        random_floats(rng_, static_cast<std::size_t>(kRows * k), 0.05f);
    for (const std::int64_t group : {std::int64_t{32}, std::int64_t{64}, std::int64_t{128}, k}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " group=" + std::to_string(group));
      StatusOr<QuantizedMatrix> q =
          quantize_int4_rtn("w", f32_tensor(values, kRows, k), kRows, k, group);
      ASSERT_TRUE(q.ok()) << q.status().to_string();
      expect_kernels_match(pool_, rng_, *q);
    }
  }
}

// Act-order: stored columns are a permutation of the input channels.
TEST_F(QuantMatmul, Q4ZWithInputPermutation) {
  constexpr std::int64_t kRows = 21;
  constexpr std::int64_t kCols = 160;
  const std::vector<float> values = random_floats(rng_, kRows * kCols, 0.05f);
  StatusOr<QuantizedMatrix> q =
      quantize_int4_rtn("w", f32_tensor(values, kRows, kCols), kRows, kCols, 32);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  q->input_permutation.resize(kCols);
  std::iota(q->input_permutation.begin(), q->input_permutation.end(), 0);
  std::shuffle(q->input_permutation.begin(), q->input_permutation.end(), rng_);
  expect_kernels_match(pool_, rng_, *q);
}

TEST_F(QuantMatmul, PermutedWeightEqualsUnpermutedProduct) {
  // y = x[:, perm] · W_stored^T must equal x · W^T with W's columns put back in input order.
  constexpr std::int64_t kRows = 9;
  constexpr std::int64_t kCols = 64;
  const std::vector<float> values = random_floats(rng_, kRows * kCols, 0.05f);
  StatusOr<QuantizedMatrix> q =
      quantize_int4_rtn("w", f32_tensor(values, kRows, kCols), kRows, kCols, 32);
  ASSERT_TRUE(q.ok());
  std::vector<std::int32_t> perm(kCols);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng_);
  cpu::TensorView stored = cpu::dense_view(q->bytes.data(), q->dtype, kRows, kCols);
  stored.input_permutation = perm.data();
  std::vector<float> unpermuted(kRows * kCols);
  std::vector<float> row(kCols);
  for (std::int64_t n = 0; n < kRows; ++n) {
    cpu::decode_row(stored, n, 0, kCols, row.data());
    for (std::int64_t j = 0; j < kCols; ++j) unpermuted[n * kCols + perm[j]] = row[j];
  }
  const std::vector<float> x = random_floats(rng_, 3 * kCols, 1.0f);
  std::vector<float> y(3 * kRows);
  cpu::matmul(pool_, x.data(), 3, stored, nullptr, y.data());
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t n = 0; n < kRows; ++n) {
      double want = 0.0;
      for (std::int64_t k = 0; k < kCols; ++k) {
        want += static_cast<double>(x[i * kCols + k]) * unpermuted[n * kCols + k];
      }
      EXPECT_NEAR(y[i * kRows + n], want, 1e-5) << i << ", " << n;
    }
  }
}

TEST_F(QuantMatmul, F8SPerChannelAndBlockScales) {
  constexpr std::int64_t kRows = 45;
  constexpr std::int64_t kCols = 320;
  const std::vector<float> values = random_floats(rng_, kRows * kCols, 0.05f);
  StatusOr<QuantizedMatrix> per_channel =
      quantize_fp8_per_channel("w", f32_tensor(values, kRows, kCols), kRows, kCols);
  ASSERT_TRUE(per_channel.ok()) << per_channel.status().to_string();
  expect_kernels_match(pool_, rng_, *per_channel);

  // A checkpoint with 16x64 block scales over random E4M3 codes (NaN codes left out).
  std::vector<std::uint8_t> codes(kRows * kCols);
  for (std::uint8_t& c : codes) {
    do c = static_cast<std::uint8_t>(rng_());
    while ((c & 0x7F) == 0x7F);
  }
  const std::int64_t tiles = ((kRows + 15) / 16) * (kCols / 64);
  const std::vector<float> scales = random_floats(rng_, static_cast<std::size_t>(tiles), 0.01f);
  const ModelTensor weight{"w",
                           DType::kF8E4M3,
                           {static_cast<std::uint64_t>(kRows), static_cast<std::uint64_t>(kCols)},
                           codes};
  const ModelTensor scale = f32_tensor(scales, (kRows + 15) / 16, kCols / 64);
  QuantizationConfig config;
  config.method = QuantizationMethod::kFp8;
  config.fp8_strategy = Fp8ScaleStrategy::kBlock;
  config.fp8_block_size = {16, 64};
  StatusOr<QuantizedMatrix> block = fp8_from_checkpoint("w", weight, scale, config, kRows, kCols);
  ASSERT_TRUE(block.ok()) << block.status().to_string();
  expect_kernels_match(pool_, rng_, *block);
}

// The row decoder (AVX2 where available) against the reference dequantizer, bit for bit, on
// random blocks: any scale, any zero 0..16, any code (NaN codes included).
TEST_F(QuantMatmul, DecodeMatchesReference) {
  for (const DType dtype : {DType::kQ4_Z, DType::kF8_S}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const DTypeInfo& info = dtype_info(dtype);
    constexpr std::int64_t kBlocks = 50;
    std::vector<std::uint8_t> bytes(kBlocks * info.block_bytes + 1);
    for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng_());
    for (std::int64_t b = 0; b < kBlocks; ++b) {
      std::uint8_t* block = bytes.data() + 1 + b * info.block_bytes;
      if (dtype == DType::kQ4_Z) {
        block[1] &= 0xFB;  // An exponent below 31: a finite fp16 scale.
        block[2] = static_cast<std::uint8_t>(rng_() % 17);
      } else {
        const float s = std::ldexp(1.0f + static_cast<float>(rng_() % 1000) / 1000.0f,
                                   static_cast<int>(rng_() % 20) - 15);
        std::memcpy(block, &s, 4);
      }
    }
    const cpu::TensorView t = cpu::dense_view(bytes.data() + 1, dtype, 1, kBlocks * 32);
    std::vector<float> want(kBlocks * 32);
    std::vector<float> got(kBlocks * 32);
    ASSERT_TRUE(dequantize(dtype, std::span(bytes.data() + 1, bytes.size() - 1), want).ok());
    cpu::decode_row(t, 0, 0, kBlocks * 32, got.data());
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {  // E4M3's NaN codes: any NaN will do.
        ASSERT_TRUE(std::isnan(got[i])) << i;
        continue;
      }
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

}  // namespace
}  // namespace pagoda::quant
