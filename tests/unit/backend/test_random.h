// Seeded random inputs for the CPU op tests. The seed differs per run (so repeated runs explore
// more inputs) unless PAGODA_TEST_SEED fixes it; every test prints it on failure.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/dtype.h"

namespace pagoda::cpu::testing {

/// The run's seed: $PAGODA_TEST_SEED or a fresh random one.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* fixed = std::getenv("PAGODA_TEST_SEED");
    if (fixed != nullptr) return static_cast<std::uint64_t>(std::strtoull(fixed, nullptr, 10));
    return (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }();
  return seed;
}

/// The line a SCOPED_TRACE shows so a failure can be replayed.
inline std::string seed_trace() {
  return "rerun with PAGODA_TEST_SEED=" + std::to_string(test_seed());
}

/// Whether a and b hold the same floats bit for bit.
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// n floats uniform in [lo, hi).
inline std::vector<float> random_floats(std::mt19937_64& rng, std::size_t n, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// x [m, k] uniform in [-1, 1) with an outlier (x 40) every 53 values, as activations have outlier
/// channels: an int16 kernel's blocks then round on different scales.
inline std::vector<float> activations(std::mt19937_64& rng, std::int64_t m, std::int64_t k) {
  std::vector<float> x = random_floats(rng, static_cast<std::size_t>(m * k));
  for (std::size_t i = 0; i < x.size(); i += 53) x[i] *= 40.0f;
  return x;
}

/// fp16 bits of a finite value of magnitude in [2^(low_exp-15), 2^(high_exp-14)), random sign.
inline std::uint16_t random_half(std::mt19937_64& rng, int low_exp, int high_exp) {
  const auto exponent =
      static_cast<std::uint16_t>(std::uniform_int_distribution<int>(low_exp, high_exp)(rng));
  const auto mantissa = static_cast<std::uint16_t>(rng() & 0x3FF);
  const auto sign = static_cast<std::uint16_t>((rng() & 1) << 15);
  return static_cast<std::uint16_t>(sign | (exponent << 10) | mantissa);
}

/// Sets sub-block scale i (0..15; Q4_K/Q5_K take i % 8) of the K-quant super-block at b to zero.
inline void zero_k_scale(std::uint8_t* b, DType dtype, std::uint64_t i) {
  switch (dtype) {
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // 6-bit scale j: bits 0-5 of byte j (j < 4), else the low nibble of byte j + 4 and the top
      // two bits of byte j - 4.
      std::uint8_t* s = b + 4;
      const std::uint64_t j = i % 8;
      if (j < 4) {
        s[j] &= 0xC0;
      } else {
        s[j + 4] &= 0xF0;
        s[j - 4] &= 0x3F;
      }
      break;
    }
    case DType::kQ6_K: b[192 + i] = 0; break;
    case DType::kQ3_K: {
      // Stored with an offset of 32: low nibble 0, high bits 2.
      std::uint8_t* s = b + 96;
      if (i < 8) {
        s[i] &= 0xF0;
      } else {
        s[i - 8] &= 0x0F;
      }
      const int shift = static_cast<int>(2 * (i / 4));
      s[8 + i % 4] = static_cast<std::uint8_t>((s[8 + i % 4] & ~(3 << shift)) | (2 << shift));
      break;
    }
    case DType::kQ2_K: b[i] &= 0xF0; break;  // the scale; its min stays
    default: break;
  }
}

/// `rows` rows of `cols` random elements of `dtype`, stored `offset` bytes into the returned
/// buffer (so tests can hand kernels unaligned rows). Quant bytes are uniform; fp16 scales and
/// minimums are small finite values so sums stay well inside float range.
inline std::vector<std::uint8_t> random_weights(std::mt19937_64& rng, DType dtype,
                                                std::int64_t rows, std::int64_t cols,
                                                std::size_t offset = 0) {
  const DTypeInfo& info = dtype_info(dtype);
  const std::size_t num_blocks = static_cast<std::size_t>(rows * cols / info.block_size);
  std::vector<std::uint8_t> bytes(offset + num_blocks * static_cast<std::size_t>(info.block_bytes));
  for (std::size_t i = offset; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(rng());
  auto put_half = [&](std::size_t at, std::uint16_t bits) { std::memcpy(&bytes[at], &bits, 2); };
  for (std::size_t b = 0; b < num_blocks; ++b) {
    const std::size_t at = offset + b * static_cast<std::size_t>(info.block_bytes);
    switch (dtype) {
      case DType::kF32: {
        const float x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        std::memcpy(&bytes[at], &x, 4);
        break;
      }
      case DType::kF16: put_half(at, random_half(rng, 8, 15)); break;
      case DType::kBF16: {
        const float x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        std::uint32_t bits;
        std::memcpy(&bits, &x, 4);
        put_half(at, static_cast<std::uint16_t>(bits >> 16));
        break;
      }
      case DType::kQ8_0:
      case DType::kQ4_0:
      case DType::kQ5_0: put_half(at, random_half(rng, 5, 10)); break;
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        put_half(at, random_half(rng, 5, 10));
        put_half(at + 2, random_half(rng, 5, 10));
        break;
      case DType::kQ6_K: put_half(at + 208, random_half(rng, 3, 8)); break;
      case DType::kQ3_K: put_half(at + 108, random_half(rng, 3, 8)); break;
      case DType::kQ2_K:
        put_half(at + 80, random_half(rng, 5, 10));
        put_half(at + 82, random_half(rng, 5, 10));
        break;
      default: break;
    }
    // Random bytes give the K-quants' sub-block scales every value, but a zero only rarely:
    // zero one sub-block's scale in half of the super-blocks.
    if (info.block_size == 256 && (rng() & 1) != 0) zero_k_scale(&bytes[at], dtype, rng() % 16);
  }
  return bytes;
}

}  // namespace pagoda::cpu::testing
