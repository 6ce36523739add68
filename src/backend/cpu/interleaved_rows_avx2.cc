// deinterleave_panel_avx2 (interleaved_rows.h): a panel's 4-byte units come back to their rows
// eight at a time, as 8 x 8 transposes of 32-bit lanes (a unit line's 8 rows in, a row's 8 units
// out); the headers' 1- and 2-byte units and the tails of shorter runs are copied one by one.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu {

namespace {

constexpr std::size_t kLineBytes = 4 * kInterleavedRows;  // one 4-byte unit of 16 rows

// v[i] holds unit i of rows 0-7 (lane r = row r); afterwards v[r] holds units 0-7 of row r.
inline void transpose8x8(__m256i v[8]) {
  __m256i a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    a[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
    v[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
  }
}

}  // namespace

void deinterleave_panel_avx2(const TensorView& w, std::int64_t panel, std::uint8_t* out) {
  PAGODA_CHECK(w.interleaved && panel >= 0 && panel * kInterleavedRows < w.num_rows)
      << "panel " << panel << " of " << w.num_rows << " rows";
  const std::span<const InterleaveSegment> segments = interleave_segments(w.dtype);
  std::size_t group = 0;
  for (const InterleaveSegment& s : segments) group += static_cast<std::size_t>(s.bytes);
  const std::size_t groups = w.row_stride / group;
  const std::int64_t rows = std::min(kInterleavedRows, w.num_rows - panel * kInterleavedRows);
  const std::uint8_t* in = static_cast<const std::uint8_t*>(w.data) +
                           static_cast<std::size_t>(panel) * w.row_stride * kInterleavedRows;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint8_t* at = in + g * group * kInterleavedRows;
    std::uint8_t* row0 = out + g * group;
    for (const InterleaveSegment& s : segments) {
      const auto unit = static_cast<std::size_t>(s.unit);
      const std::size_t units = static_cast<std::size_t>(s.bytes) / unit;
      std::size_t i = 0;
      if (unit == 4) {
        for (; i + 8 <= units; i += 8) {
          for (int side = 0; side < 2; ++side) {  // rows 0-7, rows 8-15
            const std::int64_t first = 8 * side;
            if (first >= rows) break;
            __m256i v[8];
            for (int u = 0; u < 8; ++u) {
              v[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                  at + (i + static_cast<std::size_t>(u)) * kLineBytes + 32 * side));
            }
            transpose8x8(v);
            const std::int64_t count = std::min<std::int64_t>(8, rows - first);
            for (std::int64_t r = 0; r < count; ++r) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(
                                      row0 + static_cast<std::size_t>(first + r) * w.row_stride +
                                      static_cast<std::size_t>(s.offset) + i * 4),
                                  v[r]);
            }
          }
        }
      }
      // The rest, unit by unit, each a move of a constant size.
      const auto copy_units = [&](auto unit_constant) {
        constexpr std::size_t kUnit = decltype(unit_constant)::value;
        for (; i < units; ++i) {
          for (std::int64_t r = 0; r < rows; ++r) {
            std::memcpy(row0 + static_cast<std::size_t>(r) * w.row_stride +
                            static_cast<std::size_t>(s.offset) + i * kUnit,
                        at + (i * kInterleavedRows + static_cast<std::size_t>(r)) * kUnit, kUnit);
          }
        }
      };
      if (unit == 4) copy_units(std::integral_constant<std::size_t, 4>{});
      if (unit == 2) copy_units(std::integral_constant<std::size_t, 2>{});
      if (unit == 1) copy_units(std::integral_constant<std::size_t, 1>{});
      at += static_cast<std::size_t>(s.bytes) * kInterleavedRows;
    }
  }
}

}  // namespace pagoda::cpu
