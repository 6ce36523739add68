// F8_S blocks to the GPU's per-channel FP8 layout: codes and scales exactly as the blocks hold
// them (checked against the reference dequantizer), and block-scaled weights refused.
#include "quant/fp8_channel_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "model/dequantize.h"
#include "random_quant_blocks.h"

namespace pagoda::quant {
namespace {

using testing::random_f8_s;

TEST(Fp8ChannelLayout, PerChannelBlocksSplitExactly) {
  std::mt19937_64 rng(5);
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 32}, {37, 96}, {16, 4128}}) {
    const QuantizedMatrix q = random_f8_s(rng, rows, cols, true);
    StatusOr<Fp8ChannelMatrix> m = split_fp8_per_channel(q);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    std::vector<float> want(static_cast<std::size_t>(rows * cols));
    ASSERT_TRUE(dequantize(DType::kF8_S, q.bytes, want).ok());
    for (std::int64_t n = 0; n < rows; ++n) {
      for (std::int64_t k = 0; k < cols; ++k) {
        const auto i = static_cast<std::size_t>(n * cols + k);
        ASSERT_EQ(m->scales[static_cast<std::size_t>(n)] * fp8_e4m3_to_float(m->codes[i]), want[i])
            << n << ", " << k;
      }
    }
  }
}

// Rows are split on several threads in ranges of 64: row counts around the ranges' edges give
// the codes and scales a plain block-by-block copy gives.
TEST(Fp8ChannelLayout, ParallelSplitEqualsABlockByBlockCopy) {
  std::mt19937_64 rng(7);
  for (const std::int64_t rows : {1, 63, 64, 65, 200}) {
    const std::int64_t cols = 96;
    const QuantizedMatrix q = random_f8_s(rng, rows, cols, true);
    StatusOr<Fp8ChannelMatrix> m = split_fp8_per_channel(q);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    std::vector<std::uint8_t> codes;
    std::vector<float> scales;
    for (std::int64_t n = 0; n < rows; ++n) {
      const std::uint8_t* row = q.bytes.data() + n * q.row_bytes();
      float scale = 0.0f;
      std::memcpy(&scale, row, sizeof(scale));
      scales.push_back(scale);
      for (std::int64_t b = 0; b < cols / 32; ++b) {
        codes.insert(codes.end(), row + b * 36 + 4, row + b * 36 + 36);
      }
    }
    EXPECT_EQ(std::vector<std::uint8_t>(m->codes.begin(), m->codes.end()), codes)
        << rows << " rows";
    EXPECT_EQ(m->scales, scales) << rows << " rows";
  }
}

// Whichever threads find block-scaled rows, the refusal names the first.
TEST(Fp8ChannelLayout, RefusalNamesTheFirstBlockScaledRow) {
  std::mt19937_64 rng(8);
  QuantizedMatrix q = random_f8_s(rng, 300, 64, true);
  for (const std::int64_t n : {250, 70, 130}) {
    const float other = 3.0f;
    std::memcpy(q.bytes.data() + n * q.row_bytes() + 36, &other, sizeof(other));
  }
  const StatusOr<Fp8ChannelMatrix> m = split_fp8_per_channel(q);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("row 70)"), std::string::npos) << m.status().message();
}

TEST(Fp8ChannelLayout, BlockScalesAreRefused) {
  std::mt19937_64 rng(6);
  const StatusOr<Fp8ChannelMatrix> m = split_fp8_per_channel(random_f8_s(rng, 4, 128, false));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  QuantizedMatrix q4;  // Q4_Z by default
  q4.rows = 1;
  q4.cols = 32;
  q4.bytes.resize(19);
  EXPECT_EQ(split_fp8_per_channel(q4).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda::quant
