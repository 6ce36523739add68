// F8_S blocks to the GPU's per-channel FP8 layout: codes and scales exactly as the blocks hold
// them (checked against the reference dequantizer), and block-scaled weights refused.
#include "quant/fp8_channel_layout.h"

#include <gtest/gtest.h>

#include <random>

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
