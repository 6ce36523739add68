// GGUF blocks repacked into the GPU's W4A16 tiles (quant/gguf_repack.h): every weight of every
// type reads back bit for bit as the CPU's reference dequantizer (the oracle) computes it, at
// awkward row counts and widths, with K-quant sub-block scales of every value (zero included);
// padding rows carry zero scales; and the kernel's register arithmetic on 8-bit codes (two
// nibbles OR'ed into 16-bit floats, then hi * 16 + (lo - code_zero) in one FMA) gives the exact
// integer q - code_zero in bf16 and fp16 for every code and zero the repacker writes.
#include "quant/gguf_repack.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../backend/test_random.h"
#include "gguf_test_blocks.h"
#include "model/dequantize.h"

namespace pagoda::quant {
namespace {

struct Case {
  DType dtype;
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;  // rows, cols
};

std::vector<Case> cases() {
  const std::vector<std::pair<std::int64_t, std::int64_t>> blocks32 = {
      {1, 32}, {17, 96}, {33, 4128}, {16, 64}};
  const std::vector<std::pair<std::int64_t, std::int64_t>> blocks256 = {
      {1, 256}, {19, 768}, {33, 2304}, {16, 512}};
  return {{DType::kQ4_1, blocks32}, {DType::kQ5_0, blocks32},  {DType::kQ5_1, blocks32},
          {DType::kQ8_0, blocks32}, {DType::kQ4_K, blocks256}, {DType::kQ5_K, blocks256},
          {DType::kQ6_K, blocks256}};
}

TEST(GgufRepack, WeightsReadBackBitForBitAsTheReferenceDequantizer) {
  std::mt19937_64 rng(cpu::testing::test_seed());
  SCOPED_TRACE(cpu::testing::seed_trace());
  for (const Case& c : cases()) {
    for (const auto& [rows, cols] : c.shapes) {
      SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols));
      const std::vector<std::uint8_t> bytes =
          cpu::testing::random_weights(rng, c.dtype, rows, cols);
      std::vector<float> want(static_cast<std::size_t>(rows * cols));
      ASSERT_TRUE(dequantize(c.dtype, bytes, want).ok());
      StatusOr<W4A16Matrix> m = repack_gguf(c.dtype, bytes.data(), rows, cols);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      EXPECT_TRUE(m->gguf_form());
      EXPECT_EQ(m->eight_bit(), gguf_repack_eight_bit(c.dtype));
      int largest_code = 0;
      for (std::int64_t n = 0; n < rows; ++n) {
        for (std::int64_t k = 0; k < cols; ++k) {
          const float w = w4a16_weight(*m, n, k);
          const float ref = want[static_cast<std::size_t>(n * cols + k)];
          ASSERT_EQ(std::bit_cast<std::uint32_t>(w), std::bit_cast<std::uint32_t>(ref))
              << "row " << n << " col " << k << ": " << w << " vs " << ref;
          largest_code = std::max(largest_code, w4a16_code(*m, n, k));
        }
      }
      // The high nibbles are exercised where the type has them.
      EXPECT_EQ(largest_code > 15, gguf_repack_eight_bit(c.dtype));
      // Padding rows multiply nothing.
      for (std::int64_t s = 0; s < m->scale_groups(); ++s) {
        for (std::int64_t n = rows; n < m->padded_rows(); ++n) {
          const auto at = static_cast<std::size_t>(s * m->padded_rows() + n);
          EXPECT_EQ(m->scales[at], 0);
          if (!m->mins.empty()) EXPECT_EQ(m->mins[at], 0);
        }
      }
    }
  }
}

TEST(GgufRepack, DeviceBytesAreNearTheFileBytes) {
  // Bits per weight on the GPU (codes + scales + mins) against the file's.
  const std::int64_t rows = 64, cols = 4096;
  std::mt19937_64 rng(3);
  for (const auto& [dtype, most_bits] :
       std::vector<std::pair<DType, double>>{{DType::kQ4_1, 5.5},
                                             {DType::kQ4_K, 4.625},
                                             {DType::kQ8_0, 8.75},
                                             {DType::kQ5_0, 8.75},
                                             {DType::kQ5_K, 8.625},
                                             {DType::kQ6_K, 8.5625}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto bytes = cpu::testing::random_weights(rng, dtype, rows, cols);
    StatusOr<W4A16Matrix> m = repack_gguf(dtype, bytes.data(), rows, cols);
    ASSERT_TRUE(m.ok());
    EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(m->device_bytes()) / (rows * cols), most_bits);
  }
}

// The test quantizer (gguf_test_blocks.h) that the GPU executor tests feed both executors writes
// valid blocks that decode near the weights it was given.
TEST(GgufRepack, TestQuantizerWritesBlocksNearTheWeights) {
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const std::int64_t rows = 8, cols = 512;
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (float& v : w) v = dist(rng);
  for (const auto& [dtype, bound] : std::vector<std::pair<DType, double>>{{DType::kQ4_1, 0.12},
                                                                          {DType::kQ5_0, 0.08},
                                                                          {DType::kQ8_0, 0.01},
                                                                          {DType::kQ4_K, 0.12},
                                                                          {DType::kQ5_K, 0.06},
                                                                          {DType::kQ6_K, 0.04}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::vector<std::uint8_t> bytes = testing::quantize_gguf(dtype, w.data(), rows, cols);
    std::vector<float> back(w.size());
    ASSERT_TRUE(dequantize(dtype, bytes, back).ok());
    double err = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      err += (back[i] - w[i]) * (back[i] - w[i]);
      norm += w[i] * w[i];
    }
    EXPECT_LT(std::sqrt(err / norm), bound);
    EXPECT_GT(std::sqrt(err / norm), 0.0);
  }
}

TEST(GgufRepack, RefusesOtherTypesAndPartialBlocks) {
  const std::vector<std::uint8_t> zeros(4096, 0);
  EXPECT_FALSE(repack_gguf(DType::kQ4_0, zeros.data(), 1, 32).ok());
  EXPECT_FALSE(repack_gguf(DType::kF16, zeros.data(), 1, 32).ok());
  EXPECT_FALSE(repack_gguf(DType::kQ4_K, zeros.data(), 1, 128).ok());
  EXPECT_FALSE(repack_gguf(DType::kQ8_0, zeros.data(), 1, 48).ok());
  EXPECT_FALSE(gguf_repack_supported(DType::kQ4_0));
  EXPECT_TRUE(gguf_repack_supported(DType::kQ6_K));
}

// The 16-bit float with `bits` significant bits nearest to v (ties to even): bf16 keeps 8, fp16
// 11 (no subnormals or overflow arise for these small integers).
float round_to_bits(float v, int bits) {
  if (v == 0.0f) return v;
  int e = 0;
  std::frexp(v, &e);
  const float unit = std::ldexp(1.0f, e - bits);
  return std::nearbyint(v / unit) * unit;
}

// The kernel's decode of an 8-bit code q = lo + 16 hi, in 16-bit floats with magic M (bf16 128,
// fp16 1024): a = (M + lo) - (M + z), b = (M + hi) - M, w = fma(b, 16, a), each rounded to the
// format. Every intermediate and the result must be exact, so the B fragments hold q - z.
TEST(GgufRepack, KernelNibbleArithmeticIsExact) {
  for (const auto& [bits, magic] : std::vector<std::pair<int, float>>{{8, 128.0f}, {11, 1024.0f}}) {
    for (int z : {0, 16, 32, 128}) {
      for (int q = 0; q < 256; ++q) {
        const float lo = static_cast<float>(q & 15), hi = static_cast<float>(q >> 4);
        const float base = round_to_bits(magic + static_cast<float>(z), bits);
        ASSERT_EQ(base, magic + static_cast<float>(z));
        const float a = round_to_bits((magic + lo) - base, bits);
        const float b = round_to_bits((magic + hi) - magic, bits);
        const float w = round_to_bits(b * 16.0f + a, bits);
        ASSERT_EQ(w, static_cast<float>(q - z)) << "bits " << bits << " z " << z << " q " << q;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::quant
