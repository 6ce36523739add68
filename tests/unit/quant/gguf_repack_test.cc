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
  return {{DType::kQ4_1, blocks32},  {DType::kQ5_0, blocks32},  {DType::kQ5_1, blocks32},
          {DType::kQ8_0, blocks32},  {DType::kQ4_K, blocks256}, {DType::kQ5_K, blocks256},
          {DType::kQ6_K, blocks256}, {DType::kQ2_K, blocks256}, {DType::kQ3_K, blocks256}};
}

// Reads every lane's codes the way the CUDA kernel does (kernels/gemm/w4a16_gemm.cu: a lane's
// 16-byte vector of `packed` per tile, word s for step s; its hi_bits words of `packed_hi`, split
// per step as the kernel splits them; nibble pair i, element e: low nibble at bit 4i + 16e, high
// bits at hi_bits * i + 16e of the step's hi word) and checks each code lands at the (row, col)
// the PTX ISA's mma.m16n8k16 B fragment gives that lane (register b_r, element e of lane (g, t):
// k = 2t + e + 8r, n = g), for the 4 n-tile/register pairs of a 16-row tile.
void expect_kernel_reads_the_codes(const W4A16Matrix& m) {
  const int hb = m.hi_bits;
  for (std::int64_t nt = 0; nt < m.row_tiles(); ++nt) {
    for (std::int64_t kt = 0; kt < m.k_tiles(); ++kt) {
      const std::int64_t tile = nt * m.k_tiles() + kt;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        std::uint32_t hi_words[4] = {0, 0, 0, 0};
        const std::uint32_t* h = hb > 0 ? m.packed_hi.data() + (tile * 32 + lane) * hb : nullptr;
        if (hb == 4) {
          for (int s = 0; s < 4; ++s) hi_words[s] = h[s];
        } else if (hb == 2) {
          hi_words[0] = h[0];
          hi_words[1] = h[0] >> 8;
          hi_words[2] = h[1];
          hi_words[3] = h[1] >> 8;
        } else if (hb == 1) {
          for (int s = 0; s < 4; ++s) hi_words[s] = h[0] >> (4 * s);
        }
        for (int step = 0; step < 4; ++step) {
          const std::uint32_t word =
              m.packed[static_cast<std::size_t>(tile * 128 + 4 * lane + step)];
          for (int pair = 0; pair < 4; ++pair) {
            for (int e = 0; e < 2; ++e) {
              int code = static_cast<int>((word >> (4 * pair + 16 * e)) & 0xF);
              if (hb > 0) {
                code |=
                    static_cast<int>((hi_words[step] >> (hb * pair + 16 * e)) & ((1u << hb) - 1))
                    << 4;
              }
              const std::int64_t row = nt * 16 + (pair / 2) * 8 + g;
              const std::int64_t col = kt * 64 + step * 16 + 2 * t + e + 8 * (pair % 2);
              const int want = row < m.rows && col < m.cols ? w4a16_code(m, row, col) : 0;
              ASSERT_EQ(code, want) << "tile " << nt << "," << kt << " lane " << lane << " step "
                                    << step << " pair " << pair << " e " << e;
            }
          }
        }
      }
    }
  }
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
      EXPECT_EQ(m->hi_bits, gguf_repack_hi_bits(c.dtype));
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
      // The high bits are exercised where the type has them.
      if (m->hi_bits > 0) {
        EXPECT_GE(largest_code, (16 << m->hi_bits) / 2);
      }
      EXPECT_LT(largest_code, 16 << m->hi_bits);
      expect_kernel_reads_the_codes(*m);
      // Padding rows multiply nothing.
      for (std::int64_t s = 0; s < m->scale_groups(); ++s) {
        for (std::int64_t n = rows; n < m->padded_rows(); ++n) {
          const auto at = static_cast<std::size_t>(s * m->padded_rows() + n);
          EXPECT_EQ(m->scales[at], 0);
          if (!m->mins.empty()) {
            EXPECT_EQ(m->mins[at], 0);
          }
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
                                             {DType::kQ5_0, 5.75},
                                             {DType::kQ5_1, 6.5},
                                             {DType::kQ5_K, 5.625},
                                             {DType::kQ6_K, 6.5625},
                                             {DType::kQ2_K, 5.125},
                                             {DType::kQ3_K, 4.5625}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto bytes = cpu::testing::random_weights(rng, dtype, rows, cols);
    StatusOr<W4A16Matrix> m = repack_gguf(dtype, bytes.data(), rows, cols);
    ASSERT_TRUE(m.ok());
    EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(m->device_bytes()) / (rows * cols), most_bits);
    const DType types[] = {dtype};
    EXPECT_EQ(gguf_device_bytes(types, rows, cols), m->device_bytes());
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

// Mixed parts fold each zero into the min term, -z d in fp16: a Q6_K scale d past 65504 / 32
// cannot, and the stack is refused (no real file has weights of 10^4 and more).
TEST(GgufRepack, MixedStackRefusesAZeroFoldThatOverflowsFp16) {
  std::mt19937_64 rng(5);
  const auto q4 = cpu::testing::random_weights(rng, DType::kQ4_K, 16, 256);
  auto q6 = cpu::testing::random_weights(rng, DType::kQ6_K, 8, 256);
  const GgufPart ok_parts[] = {{DType::kQ4_K, q4.data(), 16, q4.size() / 16},
                               {DType::kQ6_K, q6.data(), 8, q6.size() / 8}};
  ASSERT_TRUE(repack_gguf_parts(ok_parts, 256).ok());
  q6[3 * 210 + 208] = 0x00;  // row 3's d = 4096 (fp16 0x6C00): -32 d = -131072 overflows
  q6[3 * 210 + 209] = 0x6C;
  const GgufPart bad_parts[] = {{DType::kQ4_K, q4.data(), 16, q4.size() / 16},
                                {DType::kQ6_K, q6.data(), 8, q6.size() / 8}};
  const auto refused = repack_gguf_parts(bad_parts, 256);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("Q6_K"), std::string::npos)
      << refused.status().to_string();
  // Alone, the same Q6_K rows keep their zero and repack.
  EXPECT_TRUE(repack_gguf(DType::kQ6_K, q6.data(), 8, 256).ok());
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

// The kernel's decode of a code q = lo + 16 hi, in 16-bit floats with magic M (bf16 128, fp16
// 1024): 5- and 6-bit codes (q < 64) OR'ed whole into the mantissa, w = (M + q) - (M + z); 8-bit
// ones a = (M + lo) - (M + z), b = (M + hi) - M, w = fma(b, 16, a); each step rounded to the
// format. Every intermediate and the result must be exact, so the B fragments hold q - z.
TEST(GgufRepack, KernelNibbleArithmeticIsExact) {
  for (const auto& [bits, magic] : std::vector<std::pair<int, float>>{{8, 128.0f}, {11, 1024.0f}}) {
    for (int z : {0, 16, 32}) {
      for (int q = 0; q < 64; ++q) {
        ASSERT_EQ(round_to_bits(magic + static_cast<float>(q), bits),
                  magic + static_cast<float>(q));
        const float w =
            round_to_bits((magic + static_cast<float>(q)) - (magic + static_cast<float>(z)), bits);
        ASSERT_EQ(w, static_cast<float>(q - z)) << "bits " << bits << " z " << z << " q " << q;
      }
    }
  }
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
