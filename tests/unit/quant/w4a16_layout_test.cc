// The GPU's W4A16 layout, built on the host: every weight reads back exactly as the reference
// dequantizer gives it (Q4_Z and GGUF Q4_0), the padding multiplies nothing, and each lane's
// words decode into the mma.m16n8k16 B fragment that the PTX ISA defines for that lane
// (register b_r, element e of lane (g, t): k = 2t + e + 8r, n = g), so the CUDA kernel's
// register-level unpacking is checked here, without a GPU, against the hardware's contract.
#include "quant/w4a16_layout.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/dequantize.h"
#include "random_quant_blocks.h"

namespace pagoda::quant {
namespace {

using testing::random_q4_z;
using testing::random_scale_bits;

std::vector<float> dequantized(DType dtype, const std::vector<std::uint8_t>& bytes,
                               std::int64_t rows, std::int64_t cols) {
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  const Status s = dequantize(dtype, bytes, w);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return w;
}

void expect_weights_equal(const W4A16Matrix& m, const std::vector<float>& want) {
  for (std::int64_t n = 0; n < m.rows; ++n) {
    for (std::int64_t k = 0; k < m.cols; ++k) {
      ASSERT_EQ(w4a16_weight(m, n, k), want[static_cast<std::size_t>(n * m.cols + k)])
          << "row " << n << " col " << k;
    }
  }
}

// Decodes every lane's words the way the kernel does and checks each value lands at the
// (row, col) of the PTX B-fragment definition; padding must decode to code 0.
void expect_fragments_match(const W4A16Matrix& m) {
  for (std::int64_t nt = 0; nt < m.row_tiles(); ++nt) {
    for (std::int64_t kt = 0; kt < m.k_tiles(); ++kt) {
      const std::uint32_t* tile = m.packed.data() + (nt * m.k_tiles() + kt) * kW4A16TileWords;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int step = 0; step < 4; ++step) {
          const std::uint32_t word = tile[4 * lane + step];
          for (int pair = 0; pair < 4; ++pair) {
            const std::uint32_t bits = (word >> (4 * pair)) & 0x000F000Fu;
            const int n_tile = pair / 2, reg = pair % 2;
            for (int e = 0; e < 2; ++e) {
              const int code = static_cast<int>((bits >> (16 * e)) & 0xF);
              const std::int64_t row = nt * 16 + n_tile * 8 + g;
              const std::int64_t col = kt * 64 + step * 16 + 2 * t + e + 8 * reg;
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

struct Shape {
  std::int64_t rows, cols, group_size;
};

TEST(W4A16Layout, Q4ZWeightsReadBackExactlyAtAwkwardShapes) {
  std::mt19937_64 rng(20261127);
  for (const Shape& s : std::vector<Shape>{{1, 32, 32},
                                           {16, 64, 64},
                                           {17, 96, 32},
                                           {37, 160, 32},
                                           {40, 4128, 4128},
                                           {33, 1024, 128},
                                           {9, 640, 64}}) {
    for (bool uniform : {true, false}) {
      SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.cols) + " group " +
                   std::to_string(s.group_size) + (uniform ? " uniform" : " per block"));
      const QuantizedMatrix q = random_q4_z(rng, s.rows, s.cols, s.group_size, uniform);
      StatusOr<W4A16Matrix> m = repack_w4a16(q);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      // One scale per group when the blocks agree (per-channel: one group), else per block.
      EXPECT_EQ(m->group_size, uniform || s.group_size == 32 ? s.group_size : 32);
      expect_weights_equal(
          *m, dequantized(DType::kQ4_Z, {q.bytes.begin(), q.bytes.end()}, s.rows, s.cols));
      expect_fragments_match(*m);
      for (std::int64_t g = 0; g < m->groups(); ++g) {
        for (std::int64_t n = s.rows; n < m->padded_rows(); ++n) {
          EXPECT_EQ(m->scales[static_cast<std::size_t>(g * m->padded_rows() + n)], 0);
        }
      }
    }
  }
}

TEST(W4A16Layout, ActOrderPermutationIsKept) {
  std::mt19937_64 rng(7);
  QuantizedMatrix q = random_q4_z(rng, 5, 64, 32, true);
  q.input_permutation.resize(64);
  for (int j = 0; j < 64; ++j) q.input_permutation[static_cast<std::size_t>(j)] = 63 - j;
  StatusOr<W4A16Matrix> m = repack_w4a16(q);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->input_permutation, q.input_permutation);
}

TEST(W4A16Layout, GgufQ4_0WeightsReadBackExactly) {
  std::mt19937_64 rng(11);
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 32}, {19, 96}, {24, 2080}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols / 32 * 18));
    for (std::size_t b = 0; b < bytes.size(); b += 18) {
      const std::uint16_t d = random_scale_bits(rng);
      bytes[b] = static_cast<std::uint8_t>(d & 0xFF);
      bytes[b + 1] = static_cast<std::uint8_t>(d >> 8);
      for (int j = 2; j < 18; ++j) bytes[b + j] = static_cast<std::uint8_t>(rng());
    }
    StatusOr<W4A16Matrix> m = repack_w4a16_q4_0(bytes.data(), rows, cols);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    expect_weights_equal(*m, dequantized(DType::kQ4_0, bytes, rows, cols));
    expect_fragments_match(*m);
  }
}

TEST(W4A16Layout, RefusesWhatItCannotHold) {
  QuantizedMatrix f8;
  f8.dtype = DType::kF8_S;
  f8.rows = 1;
  f8.cols = 32;
  f8.bytes.resize(36);
  EXPECT_FALSE(repack_w4a16(f8).ok());
  QuantizedMatrix short_bytes;
  short_bytes.rows = 2;
  short_bytes.cols = 32;
  short_bytes.bytes.resize(19);
  EXPECT_FALSE(repack_w4a16(short_bytes).ok());
  const std::vector<std::uint8_t> one_block(18, 0);
  EXPECT_FALSE(repack_w4a16_q4_0(one_block.data(), 1, 48).ok());
}

}  // namespace
}  // namespace pagoda::quant
