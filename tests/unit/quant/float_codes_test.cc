#include "quant/float_codes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

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

// The encoder's bit arithmetic against the formula it replaced (ilogb / ldexp / nearbyint), on
// every bf16 value (what --quantization fp8 of a bf16 model encodes, scaled) and on 2^22 random
// float bit patterns: NaN, infinities, zeros, subnormals, the 448 boundary and the carries.
std::uint8_t formula_fp8_e4m3(float value) {
  if (std::isnan(value)) return 0x7F;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude >= kFp8E4M3Max) return sign | 0x7E;
  if (magnitude < 0x1p-6f) {
    return sign | static_cast<std::uint8_t>(std::nearbyint(magnitude * 512.0f));
  }
  int exponent = std::ilogb(magnitude);
  int mantissa = static_cast<int>(std::nearbyint((std::ldexp(magnitude, -exponent) - 1.0f) * 8));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  const int code = ((exponent + 7) << 3) | mantissa;
  return sign | static_cast<std::uint8_t>(code > 0x7E ? 0x7E : code);
}

TEST(Fp8E4M3, BitArithmeticEqualsTheFormulaEverywhere) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    for (const float scale : {1.0f, 448.0f / 3.0f, 0x1p-7f}) {
      const float v = std::bit_cast<float>(b << 16) * scale;
      ASSERT_EQ(float_to_fp8_e4m3(v), formula_fp8_e4m3(v)) << "bf16 bits " << b << " x " << scale;
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 22); ++i) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    ASSERT_EQ(float_to_fp8_e4m3(v), formula_fp8_e4m3(v))
        << "bits " << std::bit_cast<std::uint32_t>(v);
  }
}

// The vectorized encoder (this CPU's clone of it) against the scalar one on the same inputs:
// every bf16 value at three scales, then random bit patterns, at lengths that leave vector
// tails.
TEST(Fp8E4M3, VectorCodesEqualTheScalarEncoder) {
  std::vector<float> values(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) values[b] = std::bit_cast<float>(b << 16);
  std::mt19937 rng(13);
  for (int i = 0; i < (1 << 20); ++i) {
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  }
  std::vector<std::uint8_t> codes(values.size());
  for (const float scale : {1.0f, 448.0f / 3.0f, 0x1p-7f}) {
    for (std::size_t begin = 0; begin < values.size();) {
      const std::size_t n = std::min<std::size_t>(values.size() - begin, 1 + rng() % 77);
      fp8_e4m3_codes(values.data() + begin, scale, codes.data() + begin,
                     static_cast<std::int64_t>(n));
      begin += n;
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(codes[i], float_to_fp8_e4m3(values[i] / scale))
          << "bits " << std::bit_cast<std::uint32_t>(values[i]) << " / " << scale;
    }
  }
}

TEST(Fp8E4M3, MaxMagnitudeSkipsNaNAsStdMaxDoes) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(1 + rng() % 300);
    for (float& v : row) v = normal(rng);
    if (trial % 3 == 0) row[rng() % row.size()] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 5 == 0) row[rng() % row.size()] = -std::numeric_limits<float>::infinity();
    if (trial % 7 == 0) std::fill(row.begin(), row.end(), -0.0f);
    float want = 0.0f;
    for (const float v : row) want = std::max(want, std::fabs(v));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(
                  max_magnitude(row.data(), static_cast<std::int64_t>(row.size()))),
              std::bit_cast<std::uint32_t>(want))
        << "trial " << trial;
  }
}

TEST(Fp16, IntegerConversionEqualsTheCompilers) {
  // The compiler's _Float16 conversion (GCC's, this build's float_to_fp16) is the oracle of the
  // integer one that compilers without it use: every 251st float, and every halfway point between
  // two neighbouring halves (where rounding to nearest even decides), each sign.
  auto check = [](float value) {
    const std::uint16_t want = float_to_fp16(value), got = float_to_fp16_by_bits(value);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(got))) << value;
    } else {
      ASSERT_EQ(got, want) << std::hexfloat << value;
    }
  };
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 251) {
    check(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  for (std::uint32_t h = 0; h < 0x7C00u; ++h) {
    const double mid = (static_cast<double>(fp16_to_float(static_cast<std::uint16_t>(h))) +
                        static_cast<double>(fp16_to_float(static_cast<std::uint16_t>(h + 1)))) /
                       2.0;
    for (const float v : {static_cast<float>(mid), -static_cast<float>(mid)}) {
      check(v);
      check(std::nextafter(v, 0.0f));
      check(std::nextafter(v, 2.0f * v));
    }
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
