#include "backend/cpu/matmul_interleaved_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_panel_readers.h"
#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx2 {

namespace {

constexpr int kLanes = 8;       // rows per ymm: one side of a panel
constexpr int kSides = 2;       // rows 0-7, rows 8-15
constexpr int kSideBytes = 32;  // ... of one side's 8 rows
constexpr std::size_t kPrefetchBytes = 4096;

// x for one row, in the forms the kernel broadcasts: per 4 columns c .. c + 3, the int16 pairs
// (q[c], q[c + 2]) and (q[c + 1], q[c + 3]) as 32-bit words (the even and odd bytes of a lane),
// and q's sum per 16 columns (what the codes' offsets take off).
struct XRow {
  const std::int32_t* even;  // [k / 4]
  const std::int32_t* odd;   // [k / 4]
  const std::int32_t* sums;  // [k / 16]
};

struct XForms {
  std::vector<std::int32_t> even, odd, sums;
};

void make_x_forms(const std::int16_t* q, std::int64_t m, std::int64_t k, XForms& x) {
  const auto units = static_cast<std::size_t>(m * k / 4);
  x.even.resize(units);
  x.odd.resize(units);
  x.sums.resize(static_cast<std::size_t>(m * k / 16));
  const auto word = [](std::int16_t low, std::int16_t high) {
    return static_cast<std::int32_t>(
        static_cast<std::uint16_t>(low) |
        (static_cast<std::uint32_t>(static_cast<std::uint16_t>(high)) << 16));
  };
  for (std::size_t u = 0; u < units; ++u) {
    const std::int16_t* c = q + 4 * u;
    x.even[u] = word(c[0], c[2]);
    x.odd[u] = word(c[1], c[3]);
  }
  for (std::size_t s = 0; s < x.sums.size(); ++s) {
    std::int32_t sum = 0;
    for (int c = 0; c < 16; ++c) sum += q[16 * s + static_cast<std::size_t>(c)];
    x.sums[s] = sum;
  }
}

// The panel readers' view (interleaved_panel_readers.h): one side of the panel, its 8 rows in a
// ymm.
struct Lanes8 {
  using Int = __m256i;
  using Float = __m256;
  int side = 0;  // rows 0-7 or 8-15
  Int unit(const std::uint8_t* p) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + side * kSideBytes));
  }
  Float halves(const std::uint8_t* p) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + side * 16)));
  }
  Int bytes(const std::uint8_t* p) const {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + side * 8)));
  }
  static Int and_(Int a, Int b) { return _mm256_and_si256(a, b); }
  static Int or_(Int a, Int b) { return _mm256_or_si256(a, b); }
  static Int srli16(Int v, int n) { return _mm256_srli_epi16(v, n); }
  static Int slli16(Int v, int n) { return _mm256_slli_epi16(v, n); }
  static Int srli32(Int v, int n) { return _mm256_srli_epi32(v, n); }
  static Int mullo32(Int a, Int b) { return _mm256_mullo_epi32(a, b); }
  static Int set1_8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
  static Int set1_32(int v) { return _mm256_set1_epi32(v); }
  static Float zero() { return _mm256_setzero_ps(); }
  static Float times(Float d, Int integer) { return _mm256_mul_ps(d, _mm256_cvtepi32_ps(integer)); }
  static Float negate(Float v) {
    return _mm256_castsi256_ps(
        _mm256_xor_si256(_mm256_castps_si256(v), _mm256_set1_epi32(static_cast<int>(0x80000000u))));
  }
};

// A lane's 4 code bytes as int16: columns c and c + 2 (even), c + 1 and c + 3 (odd).
template <bool kSigned>
inline void widen(__m256i codes, __m256i& even, __m256i& odd) {
  if constexpr (kSigned) {
    even = _mm256_srai_epi16(_mm256_slli_epi16(codes, 8), 8);
    odd = _mm256_srai_epi16(codes, 8);
  } else {
    even = _mm256_and_si256(codes, _mm256_set1_epi16(0x00FF));
    odd = _mm256_srli_epi16(codes, 8);
  }
}

// A side's block sums for group g of `panel` into acc[kRows]: per unit, the codes widened once for
// every row of x, then each row's int32 dot joins its fp32 accumulator with the contract's FMAs.
template <typename Panel, int kRows>
__attribute__((always_inline)) inline void side_group(const XRow* x, const float* scales,
                                                      const float* scaled_sums,
                                                      std::int64_t num_blocks,
                                                      const std::uint8_t* group, std::int64_t g,
                                                      int side, __m256* acc) {
  constexpr int kSub = Panel::kSub;
  constexpr int kUnitsPerSub = 8 / kSub;
  Panel::for_each_block(
      Lanes8{side}, group,
      [&](int j, const panels::BlockCodes<__m256i>& codes, const __m256* scale, __m256 min) {
        const std::int64_t b = g * Panel::kGroupBlocks + j;
#pragma GCC unroll 2
        for (int t = 0; t < kSub; ++t) {
          __m256i dot[kRows];
#pragma GCC unroll 8
          for (int i = 0; i < kRows; ++i) dot[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int u = t * kUnitsPerSub; u < (t + 1) * kUnitsPerSub; ++u) {
            __m256i even, odd;
            widen<Panel::kSigned>(codes.units[u], even, odd);
            const std::size_t at = static_cast<std::size_t>(b * 8 + u);
#pragma GCC unroll 8
            for (int i = 0; i < kRows; ++i) {
              dot[i] = _mm256_add_epi32(dot[i],
                                        _mm256_madd_epi16(even, _mm256_set1_epi32(x[i].even[at])));
              dot[i] =
                  _mm256_add_epi32(dot[i], _mm256_madd_epi16(odd, _mm256_set1_epi32(x[i].odd[at])));
            }
          }
#pragma GCC unroll 8
          for (int i = 0; i < kRows; ++i) {
            const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
            if constexpr (Panel::kOffset != 0) {
              const std::int32_t* sums = x[i].sums + 2 * b;
              const std::int32_t qsum = kSub == 1 ? sums[0] + sums[1] : sums[t];
              dot[i] = _mm256_sub_epi32(dot[i], _mm256_set1_epi32(Panel::kOffset * qsum));
            }
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i]),
                                     _mm256_mul_ps(scale[t], _mm256_set1_ps(scales[xb])), acc[i]);
            if constexpr (Panel::kHasMin) {
              acc[i] = _mm256_fmadd_ps(min, _mm256_set1_ps(scaled_sums[xb]), acc[i]);
            }
          }
        }
      });
}

// Up to 2 rows of x, both sides of each group while its lines are in L1; more, one side of the
// whole panel at a time (its lines in L1 or L2 again for the second), so that a side's
// accumulators and dots fit the 16 ymm registers.
template <typename Panel, int kRows>
__attribute__((flatten)) void panels_direct(const XRow* x, const float* scales,
                                            const float* scaled_sums, std::int64_t k,
                                            const std::uint8_t* panels, std::size_t row_bytes,
                                            std::int64_t num_rows, std::int64_t panel_begin,
                                            std::int64_t panel_end, float* y, std::int64_t ldy) {
  constexpr bool kSideOuter = kRows > 2;
  const std::int64_t num_blocks = k / 32;
  const std::int64_t groups = num_blocks / Panel::kGroupBlocks;
  const std::size_t group_bytes = static_cast<std::size_t>(Panel::kGroupBytes) * kInterleavedRows;
  const std::size_t panel_bytes = row_bytes * kInterleavedRows;
  const auto prefetch = [&](const std::uint8_t* group) {
    for (std::size_t line = 0; line < group_bytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(group + kPrefetchBytes + line), _MM_HINT_T0);
    }
  };
  const auto store = [&](std::int64_t p, int side, const __m256* acc) {
    const std::int64_t n0 = p * kInterleavedRows + side * kLanes;
    const std::int64_t live = std::clamp<std::int64_t>(num_rows - n0, 0, kLanes);
    if (live == 0) return;
    alignas(32) std::int32_t mask[kLanes];
    for (int l = 0; l < kLanes; ++l) mask[l] = l < live ? -1 : 0;
    const __m256i lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask));
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) _mm256_maskstore_ps(y + i * ldy + n0, lanes, acc[i]);
  };
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::uint8_t* panel = panels + static_cast<std::size_t>(p) * panel_bytes;
    if constexpr (kSideOuter) {
      for (int side = 0; side < kSides; ++side) {
        __m256 acc[kRows];
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) acc[i] = _mm256_setzero_ps();
        for (std::int64_t g = 0; g < groups; ++g) {
          const std::uint8_t* group = panel + static_cast<std::size_t>(g) * group_bytes;
          if (side == 0) prefetch(group);
          side_group<Panel, kRows>(x, scales, scaled_sums, num_blocks, group, g, side, acc);
        }
        store(p, side, acc);
      }
    } else {
      __m256 acc[kSides][kRows];
      for (int side = 0; side < kSides; ++side) {
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) acc[side][i] = _mm256_setzero_ps();
      }
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::uint8_t* group = panel + static_cast<std::size_t>(g) * group_bytes;
        prefetch(group);
        for (int side = 0; side < kSides; ++side) {
          side_group<Panel, kRows>(x, scales, scaled_sums, num_blocks, group, g, side, acc[side]);
        }
      }
      for (int side = 0; side < kSides; ++side) store(p, side, acc[side]);
    }
  }
}

}  // namespace

void interleaved_direct(DType dtype, const std::int16_t* q, const float* scales,
                        const float* scaled_sums, std::int64_t m, std::int64_t k,
                        const std::uint8_t* panels, std::size_t row_bytes, std::int64_t num_rows,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t ldy) {
  PAGODA_CHECK(m >= 1 && m <= 8) << m << " rows of x";
  thread_local XForms forms;
  make_x_forms(q, m, k, forms);
  XRow rows[8];
  for (std::int64_t i = 0; i < m; ++i) {
    rows[i] = {.even = forms.even.data() + i * k / 4,
               .odd = forms.odd.data() + i * k / 4,
               .sums = forms.sums.data() + i * k / 16};
  }
  PAGODA_CHECK(interleave_supported(dtype)) << "no interleaved kernel for " << dtype_name(dtype);
  panels::with_reader(dtype, [&](auto panel) {
    using Panel = decltype(panel);
    PAGODA_CHECK_EQ(k % (32 * Panel::kGroupBlocks), 0) << dtype_name(dtype) << " rows of " << k;
    PAGODA_CHECK_EQ(row_bytes, static_cast<std::size_t>(k / 32 / Panel::kGroupBlocks) *
                                   static_cast<std::size_t>(Panel::kGroupBytes));
    // At most kPassRows rows of x per pass over the panels: past 4, a pass's dots and
    // accumulators spill out of the 16 ymm registers, and two passes of 4 beat one of 8 (K-quants
    // 1.4x) though each reads the weights again.
    constexpr std::int64_t kPassRows = 4;
    const std::int64_t num_blocks = k / 32;
    for (std::int64_t i0 = 0; i0 < m; i0 += kPassRows) {
      int16::with_row_count<kPassRows>(std::min(kPassRows, m - i0), [&](auto count) {
        panels_direct<Panel, decltype(count)::value>(
            rows + i0, scales + i0 * num_blocks, scaled_sums + i0 * num_blocks, k, panels,
            row_bytes, num_rows, panel_begin, panel_end, y + i0 * ldy, ldy);
      });
    }
  });
}

}  // namespace pagoda::cpu::avx2
