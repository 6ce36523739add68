// `--quantization int4` and `fp8` at load: every weight within the format's rounding bound of
// the original, checked element by element (a wrong scale, zero or code fails by far more).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"
#include "quant/load_threads.h"
#include "quant/q4_z_block.h"

namespace pagoda::quant {
namespace {

ModelTensor f32_tensor(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  return ModelTensor{"w",
                     DType::kF32,
                     {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)},
                     std::span(reinterpret_cast<const std::uint8_t*>(values.data()),
                               values.size() * sizeof(float))};
}

std::vector<float> dequantized(const QuantizedMatrix& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  EXPECT_TRUE(dequantize(m.dtype, m.bytes, out).ok());
  return out;
}

TEST(Int4Rtn, EveryWeightWithinHalfAStepOfItsGroup) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  constexpr std::int64_t kRows = 13;
  constexpr std::int64_t kCols = 576;  // 4 groups of 128 and a tail of 64
  std::vector<float> w(kRows * kCols);
  for (float& v : w) v = dist(rng) + (rng() % 3 == 0 ? 0.03f : 0.0f);
  for (std::int64_t k = 0; k < kCols; ++k) w[2 * kCols + k] = 0.0f;  // An all-zero row.
  StatusOr<QuantizedMatrix> q = quantize_int4_rtn("w", f32_tensor(w, kRows, kCols), kRows, kCols);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->group_size, 128);
  const std::vector<float> got = dequantized(*q);
  for (std::int64_t n = 0; n < kRows; ++n) {
    for (std::int64_t g0 = 0; g0 < kCols; g0 += 128) {
      const std::int64_t g1 = std::min(kCols, g0 + 128);
      float lo = 0.0f;
      float hi = 0.0f;
      for (std::int64_t k = g0; k < g1; ++k) {
        lo = std::min(lo, w[n * kCols + k]);
        hi = std::max(hi, w[n * kCols + k]);
      }
      // Step d = (hi - lo) / 15 rounded to fp16 (relative 2^-11); rounding to the grid costs
      // at most d / 2, and the fp16-rounded step can push the range's ends by 15 * d * 2^-11.
      const float d = (hi - lo) / 15.0f;
      const float bound = d * (0.5f + 16.0f * 0x1p-11f) + 1e-7f;
      for (std::int64_t k = g0; k < g1; ++k) {
        const std::size_t i = static_cast<std::size_t>(n * kCols + k);
        ASSERT_LE(std::fabs(got[i] - w[i]), bound) << "row " << n << " col " << k;
      }
    }
  }
}

// The codes are round-to-nearest-even of w / d plus the zero point, and the zero point that of
// -min / d, as std::nearbyint gives them (the quantizer rounds without the libm call).
TEST(Int4Rtn, CodesAreNearbyintOfTheFormula) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-0.08f, 0.05f);
  constexpr std::int64_t kRows = 7;
  constexpr std::int64_t kCols = 256;
  std::vector<float> w(kRows * kCols);
  for (float& v : w) v = dist(rng);
  // Exact ties: a group whose values sit on half steps of d = 1.
  for (std::int64_t k = 0; k < 128; ++k) w[k] = static_cast<float>(k % 31) * 0.5f - 7.5f;
  StatusOr<QuantizedMatrix> q = quantize_int4_rtn("w", f32_tensor(w, kRows, kCols), kRows, kCols);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  for (std::int64_t n = 0; n < kRows; ++n) {
    for (std::int64_t g0 = 0; g0 < kCols; g0 += 128) {
      const std::uint8_t* block = q->bytes.data() + n * q->row_bytes() + g0 / 32 * kQ4ZBlockBytes;
      const float d = fp16_to_float(static_cast<std::uint16_t>(block[0] | (block[1] << 8)));
      float lo = 0.0f;
      for (std::int64_t k = g0; k < g0 + 128; ++k) lo = std::min(lo, w[n * kCols + k]);
      const auto zero = static_cast<int>(std::clamp(std::nearbyint(-lo / d), 0.0f, 15.0f));
      ASSERT_EQ(block[2], zero) << "row " << n << " group " << g0;
      for (std::int64_t k = g0; k < g0 + 128; ++k) {
        const std::uint8_t* b = q->bytes.data() + n * q->row_bytes() + k / 32 * kQ4ZBlockBytes;
        const int j = static_cast<int>(k % 32);
        const int code = j < 16 ? b[3 + j] & 0xF : b[3 + j - 16] >> 4;
        const float want = std::clamp(
            std::nearbyint(w[n * kCols + k] / d) + static_cast<float>(zero), 0.0f, 15.0f);
        ASSERT_EQ(code, static_cast<int>(want)) << "row " << n << " col " << k;
      }
    }
  }
}

TEST(Fp8PerChannel, EveryWeightWithinE4M3Rounding) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr std::int64_t kRows = 9;
  constexpr std::int64_t kCols = 160;
  std::vector<float> w(kRows * kCols);
  for (std::int64_t n = 0; n < kRows; ++n) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(n) - 4);  // Rows of any magnitude.
    for (std::int64_t k = 0; k < kCols; ++k) w[n * kCols + k] = dist(rng) * row_scale;
  }
  StatusOr<QuantizedMatrix> q =
      quantize_fp8_per_channel("w", f32_tensor(w, kRows, kCols), kRows, kCols);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->dtype, DType::kF8_S);
  const std::vector<float> got = dequantized(*q);
  for (std::int64_t n = 0; n < kRows; ++n) {
    float amax = 0.0f;
    for (std::int64_t k = 0; k < kCols; ++k) amax = std::max(amax, std::fabs(w[n * kCols + k]));
    const float scale = amax / 448.0f;
    for (std::int64_t k = 0; k < kCols; ++k) {
      const std::size_t i = static_cast<std::size_t>(n * kCols + k);
      // 3 mantissa bits: relative error <= 2^-4 for normals; subnormals step by 2^-9 * scale.
      const float bound = std::max(std::fabs(w[i]) * 0x1p-4f, scale * 0x1p-10f) * 1.0001f;
      ASSERT_LE(std::fabs(got[i] - w[i]), bound) << "row " << n << " col " << k;
    }
    // The largest weight maps to 448 * scale: the full range is used.
    float got_max = 0.0f;
    for (std::int64_t k = 0; k < kCols; ++k)
      got_max = std::max(got_max, std::fabs(got[n * kCols + k]));
    EXPECT_NEAR(got_max, amax, amax * 1e-6f);
  }
}

TEST(LoadThreads, ParallelRangesCoverEveryItemOnce) {
  for (const int threads : {1, 2, 3, 5, 16}) {
    for (const std::int64_t n : {0, 1, 7, 16, 17, 33, 100}) {
      for (const std::int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> visits(static_cast<std::size_t>(n));
        std::atomic<bool> oversized{false};
        parallel_ranges(
            n, grain,
            [&](std::int64_t begin, std::int64_t end) {
              if (end - begin > grain || begin >= end) oversized = true;
              for (std::int64_t i = begin; i < end; ++i) ++visits[static_cast<std::size_t>(i)];
            },
            threads);
        EXPECT_FALSE(oversized) << threads << " threads, n " << n << ", grain " << grain;
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(visits[static_cast<std::size_t>(i)], 1)
              << threads << " threads, n " << n << ", grain " << grain << ", item " << i;
        }
      }
    }
  }
}

// The quantizers run rows on several threads in ranges of 16: every row must come out as it does
// quantized alone (a one-row matrix, one range on one thread), at row counts around the ranges'
// edges, and the row-source overloads must give what the tensor ones give.
TEST(LoadTimeQuantizers, ParallelRowsEqualEachRowQuantizedAlone) {
  std::mt19937_64 rng(21);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (const std::int64_t rows : {1, 15, 17, 50}) {
    for (const std::int64_t cols : {32, 160}) {
      std::vector<float> w(static_cast<std::size_t>(rows * cols));
      for (float& v : w) v = dist(rng);
      if (rows > 3) std::fill(w.begin() + 3 * cols, w.begin() + 4 * cols, 0.0f);
      const RowSource source = [&](std::int64_t n, std::span<float> row) {
        std::copy_n(w.begin() + n * cols, cols, row.begin());
      };
      for (const bool fp8 : {true, false}) {
        SCOPED_TRACE(std::string(fp8 ? "fp8 " : "int4 ") + std::to_string(rows) + " x " +
                     std::to_string(cols));
        const auto quantize = [&](const ModelTensor& t, std::int64_t r) {
          return fp8 ? quantize_fp8_per_channel("w", t, r, cols)
                     : quantize_int4_rtn("w", t, r, cols);
        };
        StatusOr<QuantizedMatrix> all = quantize(f32_tensor(w, rows, cols), rows);
        ASSERT_TRUE(all.ok()) << all.status().to_string();
        StatusOr<QuantizedMatrix> from_rows =
            fp8 ? quantize_fp8_per_channel("w", source, rows, cols)
                : quantize_int4_rtn("w", source, rows, cols);
        ASSERT_TRUE(from_rows.ok()) << from_rows.status().to_string();
        EXPECT_EQ(from_rows->bytes, all->bytes);
        EXPECT_EQ(from_rows->group_size, all->group_size);
        const std::size_t row_bytes = all->row_bytes();
        for (std::int64_t n = 0; n < rows; ++n) {
          const std::vector<float> one(w.begin() + n * cols, w.begin() + (n + 1) * cols);
          StatusOr<QuantizedMatrix> alone = quantize(f32_tensor(one, 1, cols), 1);
          ASSERT_TRUE(alone.ok()) << alone.status().to_string();
          ASSERT_EQ(std::memcmp(all->bytes.data() + n * row_bytes, alone->bytes.data(), row_bytes),
                    0)
              << "row " << n;
        }
      }
    }
  }
}

TEST(LoadTimeQuantizers, RefuseColumnsThatDoNotFillBlocks) {
  std::vector<float> w(3 * 40, 0.5f);
  StatusOr<QuantizedMatrix> fp8 = quantize_fp8_per_channel("layer", f32_tensor(w, 3, 40), 3, 40);
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.status().message().find("layer"), std::string::npos);
  StatusOr<QuantizedMatrix> int4 = quantize_int4_rtn("layer", f32_tensor(w, 3, 40), 3, 40);
  ASSERT_FALSE(int4.ok());
}

TEST(Fp8Checkpoint, PerTensorAndPerChannelScales) {
  constexpr std::int64_t kRows = 4;
  constexpr std::int64_t kCols = 64;
  std::vector<std::uint8_t> codes(kRows * kCols);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i % 0x7E);
  const ModelTensor weight{"layer.weight", DType::kF8E4M3, {kRows, kCols}, codes};
  QuantizationConfig config;
  config.method = QuantizationMethod::kCompressedTensorsFp8;
  for (const std::int64_t num_scales : {1, 4}) {
    std::vector<float> scales(static_cast<std::size_t>(num_scales));
    for (std::int64_t i = 0; i < num_scales; ++i) scales[i] = 0.25f * static_cast<float>(i + 1);
    const ModelTensor scale{
        "layer.weight_scale",
        DType::kF32,
        {static_cast<std::uint64_t>(num_scales), 1},
        std::span(reinterpret_cast<const std::uint8_t*>(scales.data()), scales.size() * 4)};
    StatusOr<QuantizedMatrix> m = fp8_from_checkpoint("layer", weight, scale, config, kRows, kCols);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const std::vector<float> got = dequantized(*m);
    for (std::int64_t n = 0; n < kRows; ++n) {
      for (std::int64_t k = 0; k < kCols; ++k) {
        const float s = scales[num_scales == 1 ? 0 : n];
        ASSERT_EQ(got[n * kCols + k], s * fp8_e4m3_to_float(codes[n * kCols + k]));
      }
    }
  }
  const std::vector<float> three = {1.0f, 2.0f, 3.0f};
  const ModelTensor bad{"layer.weight_scale",
                        DType::kF32,
                        {3},
                        std::span(reinterpret_cast<const std::uint8_t*>(three.data()), 12)};
  StatusOr<QuantizedMatrix> m = fp8_from_checkpoint("layer", weight, bad, config, kRows, kCols);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("layer.weight_scale has 3 scales"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace pagoda::quant
