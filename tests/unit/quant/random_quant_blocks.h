// Random Q4_Z and F8_S matrices for the GPU-layout tests (host layouts and CUDA kernels): Q4_Z
// with finite fp16 scales of any mantissa, zeros 0..16, any code; F8_S with any non-NaN code.
#pragma once

#include <cstdint>
#include <random>

#include "quant/f8_s_block.h"
#include "quant/q4_z_block.h"
#include "quant/quantized_matrix.h"

namespace pagoda::quant::testing {

inline std::uint16_t random_scale_bits(std::mt19937_64& rng) {
  // A finite fp16 in [2^-14, 2): any mantissa, exponents 1..15, either sign.
  const auto exponent = static_cast<std::uint16_t>(1 + rng() % 15);
  return static_cast<std::uint16_t>(((rng() & 1) << 15) | (exponent << 10) | (rng() & 0x3FF));
}

// A Q4_Z matrix whose groups of `group_size` columns share one (scale, zero) per row, as the
// checkpoint repackers write them; `uniform` false gives every 32-block its own.
inline QuantizedMatrix random_q4_z(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols,
                                   std::int64_t group_size, bool uniform) {
  QuantizedMatrix q;
  q.rows = rows;
  q.cols = cols;
  q.group_size = group_size;
  q.bytes.resize(static_cast<std::size_t>(rows) * q.row_bytes());
  for (std::int64_t n = 0; n < rows; ++n) {
    std::uint16_t scale = 0;
    std::uint8_t zero = 0;
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      if (!uniform || (b * 32) % group_size == 0) {
        scale = random_scale_bits(rng);
        zero = static_cast<std::uint8_t>(rng() % 17);
      }
      std::uint8_t codes[32];
      for (std::uint8_t& c : codes) c = static_cast<std::uint8_t>(rng() % 16);
      write_q4_z_block(scale, zero, codes,
                       q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes() + b * 19);
    }
  }
  return q;
}

/// An F8_S matrix: one scale per row when `per_channel`, else a fresh one per 32-block.
inline QuantizedMatrix random_f8_s(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols,
                                   bool per_channel) {
  QuantizedMatrix q;
  q.dtype = DType::kF8_S;
  q.rows = rows;
  q.cols = cols;
  q.group_size = cols;
  q.bytes.resize(static_cast<std::size_t>(rows) * q.row_bytes());
  std::uniform_real_distribution<float> scale_dist(1e-4f, 1e-1f);
  for (std::int64_t n = 0; n < rows; ++n) {
    float scale = scale_dist(rng);
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      if (!per_channel && b > 0) scale = scale_dist(rng);
      std::uint8_t codes[32];
      for (std::uint8_t& c : codes) {
        do {
          c = static_cast<std::uint8_t>(rng());
        } while ((c & 0x7F) == 0x7F);  // E4M3's NaN codes
      }
      write_f8_s_block(scale, codes,
                       q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes() + b * 36);
    }
  }
  return q;
}

}  // namespace pagoda::quant::testing
