// Random Q4_Z matrices for the W4A16 tests (host layout and CUDA kernel): finite fp16 scales of
// any mantissa, zeros 0..16, any code.
#pragma once

#include <cstdint>
#include <random>

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

}  // namespace pagoda::quant::testing
