#include "quant/w4a16_layout.h"

#include <algorithm>
#include <string>

#include "model/dequantize.h"
#include "quant/load_threads.h"
#include "quant/q4_z_block.h"

namespace pagoda::quant {

namespace {

std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

// Copies 32 codes from a block's 16 nibble bytes (element j low, j + 16 high) to codes[0, 32).
void block_codes(const std::uint8_t* qs, std::uint8_t* codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = qs[j] & 0x0F;
    codes[j + 16] = qs[j] >> 4;
  }
}

// The codes of 16-row tile band `nt` ([16, cols], rows past the matrix zero) into m's tiles: each
// lane's word per step, and its high bits, at the positions w4a16_slot / w4a16_hi_slot define
// (the same map walked from the word's side).
void pack_band(const std::vector<std::uint8_t>& band, std::int64_t nt, W4A16Matrix& m) {
  const std::int64_t cols = m.cols, k_tiles = m.k_tiles();
  const int hb = m.hi_bits;
  const std::uint32_t hi_mask = (1u << hb) - 1;
  for (std::int64_t kt = 0; kt < k_tiles; ++kt) {
    const std::int64_t tile = nt * k_tiles + kt;
    std::uint32_t* out = m.packed.data() + tile * kW4A16TileWords;
    std::uint32_t* hi_out = hb > 0 ? m.packed_hi.data() + tile * 32 * hb : nullptr;
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int step = 0; step < 4; ++step) {
        std::uint32_t word = 0;
        for (int pair = 0; pair < 4; ++pair) {
          const std::uint8_t* row = band.data() + ((pair / 2) * 8 + g) * cols;
          const std::int64_t c0 = kt * kW4A16TileCols + step * 16 + 2 * t + 8 * (pair % 2);
          for (int e = 0; e < 2; ++e) {
            const std::uint32_t q = c0 + e < cols ? row[c0 + e] : 0;
            word |= (q & 0x0F) << (4 * pair + 16 * e);
            if (hb > 0) {
              const int p = (4 * step + pair) * hb;
              hi_out[lane * hb + p / 16] |= ((q >> 4) & hi_mask) << (p % 16 + 16 * e);
            }
          }
        }
        out[4 * lane + step] = word;
      }
    }
  }
}

// True when every 32-block of each group of `group_size` columns carries the same scale and
// zero, so one (scale, zero) per group says what the blocks say.
bool groups_are_uniform(const QuantizedMatrix& q, std::int64_t group_size) {
  const std::int64_t blocks_per_row = q.cols / 32;
  const std::int64_t blocks_per_group = group_size / 32;
  for (std::int64_t n = 0; n < q.rows; ++n) {
    const std::uint8_t* row = q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes();
    for (std::int64_t b = 0; b < blocks_per_row; ++b) {
      const std::uint8_t* first = row + (b - b % blocks_per_group) * kQ4ZBlockBytes;
      const std::uint8_t* block = row + b * kQ4ZBlockBytes;
      if (block[0] != first[0] || block[1] != first[1] || block[2] != first[2]) return false;
    }
  }
  return true;
}

}  // namespace

void w4a16_fill_bands(W4A16Matrix& m,
                      const std::function<void(std::int64_t, std::uint8_t*)>& fill) {
  parallel_ranges(m.row_tiles(), 1, [&](std::int64_t nt, std::int64_t) {
    std::vector<std::uint8_t> band(static_cast<std::size_t>(kW4A16TileRows * m.cols), 0);
    const std::int64_t first = nt * kW4A16TileRows;
    for (std::int64_t n = first; n < std::min(m.rows, first + kW4A16TileRows); ++n) {
      fill(n, band.data() + (n - first) * m.cols);
    }
    pack_band(band, nt, m);
  });
}

W4A16Matrix w4a16_empty(std::int64_t rows, std::int64_t cols, std::int64_t group_size,
                        bool gguf_form, int hi_bits) {
  W4A16Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size;
  const auto words = static_cast<std::size_t>(m.row_tiles() * m.k_tiles() * kW4A16TileWords);
  m.packed.assign(words, 0);
  m.hi_bits = hi_bits;
  if (hi_bits > 0) m.packed_hi.assign(words / 4 * static_cast<std::size_t>(hi_bits), 0);
  const auto per_group = static_cast<std::size_t>(m.groups() * m.padded_rows());
  m.scales.assign(per_group, 0);
  if (gguf_form) {
    m.scale_codes.assign(per_group, 0);
  } else {
    m.zeros.assign(per_group, 0);
  }
  return m;
}

StatusOr<W4A16Matrix> repack_w4a16(const QuantizedMatrix& q) {
  if (q.dtype != DType::kQ4_Z) {
    return invalid_argument(std::string("W4A16 repacks Q4_Z, not ") +
                            std::string(dtype_name(q.dtype)));
  }
  if (q.rows <= 0 || q.cols <= 0 || q.cols % 32 != 0 ||
      q.bytes.size() != static_cast<std::size_t>(q.rows) * q.row_bytes()) {
    return invalid_argument("W4A16: a Q4_Z matrix of " + std::to_string(q.rows) + " x " +
                            std::to_string(q.cols) + " with " + std::to_string(q.bytes.size()) +
                            " bytes is malformed");
  }
  std::int64_t group_size = q.group_size >= q.cols ? q.cols : q.group_size;
  if (group_size < 32 || group_size % 32 != 0 || q.cols % group_size != 0 ||
      !groups_are_uniform(q, group_size)) {
    group_size = 32;
  }
  W4A16Matrix m = w4a16_empty(q.rows, q.cols, group_size, false, 0);
  m.input_permutation = q.input_permutation;
  const std::int64_t blocks_per_row = q.cols / 32;
  w4a16_fill_bands(m, [&](std::int64_t n, std::uint8_t* codes) {
    const std::uint8_t* row = q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes();
    for (std::int64_t b = 0; b < blocks_per_row; ++b) {
      const std::uint8_t* block = row + b * kQ4ZBlockBytes;
      const std::int64_t col = b * 32;
      if (col % group_size == 0) {
        const auto at = static_cast<std::size_t>((col / group_size) * m.padded_rows() + n);
        m.scales[at] = load_u16(block);
        m.zeros[at] = block[2];
      }
      block_codes(block + 3, codes + col);
    }
  });
  return m;
}

StatusOr<W4A16Matrix> repack_w4a16_q4_0(const std::uint8_t* blocks, std::int64_t rows,
                                        std::int64_t cols) {
  if (rows <= 0 || cols <= 0 || cols % 32 != 0) {
    return invalid_argument("W4A16: Q4_0 rows of " + std::to_string(cols) +
                            " columns are not whole 32-blocks");
  }
  constexpr std::int64_t kQ4_0BlockBytes = 18;
  W4A16Matrix m = w4a16_empty(rows, cols, 32, false, 0);
  const std::int64_t blocks_per_row = cols / 32;
  w4a16_fill_bands(m, [&](std::int64_t n, std::uint8_t* codes) {
    for (std::int64_t b = 0; b < blocks_per_row; ++b) {
      const std::uint8_t* block = blocks + (n * blocks_per_row + b) * kQ4_0BlockBytes;
      const auto at = static_cast<std::size_t>(b * m.padded_rows() + n);
      m.scales[at] = load_u16(block);
      m.zeros[at] = 8;
      block_codes(block + 2, codes + b * 32);
    }
  });
  return m;
}

int w4a16_code(const W4A16Matrix& m, std::int64_t row, std::int64_t col) {
  std::int64_t word = 0;
  int shift = 0;
  w4a16_slot(row, col, m.k_tiles(), &word, &shift);
  const int lo = static_cast<int>((m.packed[static_cast<std::size_t>(word)] >> shift) & 0x0F);
  if (m.hi_bits == 0) return lo;
  w4a16_hi_slot(row, col, m.k_tiles(), m.hi_bits, &word, &shift);
  const auto hi = (m.packed_hi[static_cast<std::size_t>(word)] >> shift) & ((1u << m.hi_bits) - 1);
  return lo | static_cast<int>(hi << 4);
}

float w4a16_min_term(const W4A16Matrix& m, std::int64_t row, std::int64_t col) {
  if (m.mins.empty()) return 0.0f;
  const std::int64_t group = col / m.group_size;
  const auto at = static_cast<std::size_t>(group * m.padded_rows() + row);
  const auto super_at = static_cast<std::size_t>((group >> m.super_shift) * m.padded_rows() + row);
  return fp16_to_float(m.mins[super_at]) * static_cast<float>(m.min_codes[at]);
}

float w4a16_weight(const W4A16Matrix& m, std::int64_t row, std::int64_t col) {
  const std::int64_t group = col / m.group_size;
  const auto at = static_cast<std::size_t>(group * m.padded_rows() + row);
  if (!m.gguf_form()) {
    return fp16_to_float(m.scales[at]) * static_cast<float>(w4a16_code(m, row, col) - m.zeros[at]);
  }
  // The reference dequantizer's order: (d * sc) * q first (exact), then the min added (one
  // rounding); B = -dmin makes d*sc*q - dmin*mc's subtraction the same addition.
  const auto super_at = static_cast<std::size_t>((group >> m.super_shift) * m.padded_rows() + row);
  const float scale = fp16_to_float(m.scales[super_at]) * static_cast<float>(m.scale_codes[at]);
  const float w = scale * static_cast<float>(w4a16_code(m, row, col) - m.code_zero);
  return m.mins.empty() ? w : w + w4a16_min_term(m, row, col);
}

}  // namespace pagoda::quant
