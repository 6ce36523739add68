#include "quant/float_codes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "model/dequantize.h"

namespace pagoda::quant {
namespace {

TEST(Fp8E4M3, DecodesTheFormatsLandmarks) {
  EXPECT_EQ(fp8_e4m3_to_float(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);    // exponent 7 = bias
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);  // largest finite
  EXPECT_EQ(fp8_e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), 0x1p-6f);  // smallest normal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<std::uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
}

// Encoding picks the nearest representable value, ties to the even code, saturating at 448:
// checked against a brute-force search over all codes.
TEST(Fp8E4M3, EncodesToTheNearestCodeTiesToEven) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> log_magnitude(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    float v = std::exp2(log_magnitude(rng)) * ((rng() & 1) != 0 ? -1.0f : 1.0f);
    if (i % 4 == 0) {
      // Midpoints between neighbouring codes, where the tie rule decides.
      const int c = static_cast<int>(rng() % 0x7E);
      v = 0.5f * (fp8_e4m3_to_float(static_cast<std::uint8_t>(c)) +
                  fp8_e4m3_to_float(static_cast<std::uint8_t>(c + 1)));
    }
    int best = -1;
    float best_error = std::numeric_limits<float>::infinity();
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7F) == 0x7F) continue;
      const float error = std::fabs(fp8_e4m3_to_float(static_cast<std::uint8_t>(c)) -
                                    std::clamp(v, -448.0f, 448.0f));
      if (error < best_error || (error == best_error && (c & 1) == 0 && (c & 0x7F) != 0)) {
        best = c;
        best_error = error;
      }
    }
    const std::uint8_t got = float_to_fp8_e4m3(v);
    EXPECT_EQ(fp8_e4m3_to_float(got), fp8_e4m3_to_float(static_cast<std::uint8_t>(best)))
        << "value " << v;
  }
}

TEST(Fp16, ExactOnlyWhenRepresentable) {
  EXPECT_EQ(exact_fp16(1.5f), std::optional<std::uint16_t>(0x3E00));
  EXPECT_EQ(exact_fp16(0.1f), std::nullopt);  // 0.1 needs more than 11 significant bits
  EXPECT_EQ(exact_fp16(1e6f), std::nullopt);  // beyond fp16's range
  EXPECT_EQ(fp16_to_float(float_to_fp16(0.1f)), 0.0999755859375f);
}

}  // namespace
}  // namespace pagoda::quant
