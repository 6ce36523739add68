#include "backend/cpu/matmul_interleaved_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx2 {

namespace {

constexpr int kLanes = 8;       // rows per ymm: one side of a panel
constexpr int kSides = 2;       // rows 0-7, rows 8-15
constexpr int kUnitBytes = 64;  // one 4-byte unit of each of 16 rows
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

inline __m256i load_side(const std::uint8_t* unit, int side) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + side * kSideBytes));
}

inline __m256 load_halves(const std::uint8_t* p, int side) {  // 8 fp16, one per row
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + side * 16)));
}

inline __m256 times(__m256 d, __m256i integer) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(integer));
}

inline __m256i lane_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi32(v, shift), _mm256_set1_epi32(mask));
}

// One block's 8 code units, unit u covering columns 4u .. 4u + 3: bytes 0-255 (kSigned false: the
// codes before their offset) or signed (Q8_0's qw). Widened to int16 where they are used: all 16
// halves at once would not fit in the 16 ymm registers.
struct BlockCodes {
  __m256i units[8];
};

// The per-type reading of one side of a panel group, as matmul_interleaved_avx512.cc's panels:
//   kSub: sub-blocks per block (2: 16-column scales), kGroupBlocks, kGroupBytes (one row's),
//   kOffset (taken off the codes), kSigned (the codes are signed bytes), kHasMin
//   for_each_block(group, side, f): f(j, codes, scale[kSub], min) for each block j in order
struct Q8_0Panel {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kSub = 1, kGroupBlocks = 1, kGroupBytes = 34, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, int side, F&& f) {
    const __m256 d[1] = {load_halves(g, side)};
    BlockCodes codes;
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) codes.units[u] = load_side(g + 32 + u * kUnitBytes, side);
    f(0, codes, d, _mm256_setzero_ps());
  }
};

template <DType kDType>
struct NibblePanel {
  static constexpr DType kType = kDType;
  static constexpr bool kHasMin = kDType == DType::kQ4_1, kSigned = false;
  static constexpr int kSub = 1, kGroupBlocks = 1, kGroupBytes = kHasMin ? 20 : 18;
  static constexpr int kOffset = kHasMin ? 0 : 8;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, int side, F&& f) {
    const __m256 d[1] = {load_halves(g, side)};
    const __m256 min = kHasMin ? load_halves(g + 32, side) : _mm256_setzero_ps();
    const std::uint8_t* units = g + (kHasMin ? 64 : 32);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    BlockCodes codes;
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m256i raw = load_side(units + u * kUnitBytes, side);
      codes.units[u] = _mm256_and_si256(raw, low4);
      codes.units[4 + u] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    }
    f(0, codes, d, min);
  }
};
using Q4_0Panel = NibblePanel<DType::kQ4_0>;
using Q4_1Panel = NibblePanel<DType::kQ4_1>;

template <DType kDType>
struct KQuantPanel {
  static constexpr DType kType = kDType;
  static constexpr bool kFifthBit = kDType == DType::kQ5_K;
  static constexpr int kSub = 1, kGroupBlocks = 8, kGroupBytes = kFifthBit ? 176 : 144;
  static constexpr int kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, int side, F&& f) {
    const __m256 d = load_halves(g, side);
    const __m256 dmin = load_halves(g + 32, side);
    const __m256i s0 = load_side(g + 64, side);
    const __m256i s1 = load_side(g + 128, side);
    const __m256i s2 = load_side(g + 192, side);
    const __m256i negative = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const std::uint8_t* fifth = g + 256;
    const std::uint8_t* runs = g + (kFifthBit ? 768 : 256);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    int16::for_each_block<4>([&](auto q_constant) {
      constexpr int q = decltype(q_constant)::value;
      __m256 scale[2], min[2];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * q + half;
        __m256i sc, m;
        if (j < 4) {
          sc = lane_bits(s0, 8 * j, 63);
          m = lane_bits(s1, 8 * j, 63);
        } else {
          const int b = j - 4;
          sc = _mm256_or_si256(lane_bits(s2, 8 * b, 15), lane_bits(s0, 8 * b + 2, 0x30));
          m = _mm256_or_si256(lane_bits(s2, 8 * b + 4, 15), lane_bits(s1, 8 * b + 2, 0x30));
        }
        scale[half] = times(d, sc);
        min[half] = _mm256_castsi256_ps(
            _mm256_xor_si256(_mm256_castps_si256(times(dmin, m)), negative));  // -(dmin * m)
      }
      const std::uint8_t* run = runs + q * 8 * kUnitBytes;
      int16::for_each_block<2>([&](auto half_constant) {
        constexpr int j = 2 * q + decltype(half_constant)::value;
        BlockCodes codes;
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) {
          __m256i nibble = load_side(run + u * kUnitBytes, side);
          if constexpr (j % 2 == 1) nibble = _mm256_srli_epi16(nibble, 4);
          codes.units[u] = _mm256_and_si256(nibble, low4);
          if constexpr (kFifthBit) {  // bit j of the qh byte to bit 4
            __m256i bit = load_side(fifth + u * kUnitBytes, side);
            if constexpr (j < 4) bit = _mm256_slli_epi16(bit, 4 - j);
            if constexpr (j > 4) bit = _mm256_srli_epi16(bit, j - 4);
            codes.units[u] =
                _mm256_or_si256(codes.units[u], _mm256_and_si256(bit, _mm256_set1_epi8(0x10)));
          }
        }
        f(j, codes, &scale[j % 2], min[j % 2]);
      });
    });
  }
};
using Q4_KPanel = KQuantPanel<DType::kQ4_K>;
using Q5_KPanel = KQuantPanel<DType::kQ5_K>;

struct Q6_KPanel {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kSub = 2, kGroupBlocks = 8, kGroupBytes = 210, kOffset = 32;
  static constexpr bool kSigned = false, kHasMin = false;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, int side, F&& f) {
    const __m256 d = load_halves(g, side);
    const std::uint8_t* scales = g + 32;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i high2 = _mm256_set1_epi8(0x30);
    int16::for_each_block<8>([&](auto j_constant) {
      constexpr int j = decltype(j_constant)::value;
      constexpr int h = j / 4, jj = j % 4;
      const std::uint8_t* half = g + 32 + 256 + h * 1536;
      const std::uint8_t* ql = half + (jj % 2) * 8 * kUnitBytes;
      const std::uint8_t* qh = half + 16 * kUnitBytes;
      __m256 scale[2];
#pragma GCC unroll 2
      for (int t = 0; t < 2; ++t) {
        const __m128i bytes = _mm_loadl_epi64(
            reinterpret_cast<const __m128i*>(scales + (2 * j + t) * 16 + side * kLanes));
        scale[t] = times(d, _mm256_cvtepi8_epi32(bytes));
      }
      BlockCodes codes;
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        __m256i low = load_side(ql + u * kUnitBytes, side);
        if constexpr (jj / 2 == 1) low = _mm256_srli_epi16(low, 4);
        __m256i high = load_side(qh + u * kUnitBytes, side);  // bits 2 jj, 2 jj + 1 to bits 4, 5
        if constexpr (2 * jj < 4) high = _mm256_slli_epi16(high, 4 - 2 * jj);
        if constexpr (2 * jj > 4) high = _mm256_srli_epi16(high, 2 * jj - 4);
        codes.units[u] =
            _mm256_or_si256(_mm256_and_si256(low, low4), _mm256_and_si256(high, high2));
      }
      f(j, codes, scale, _mm256_setzero_ps());
    });
  }
};

template <typename F>
decltype(auto) with_panel_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kQ4_0: return f(Q4_0Panel{});
    case DType::kQ4_1: return f(Q4_1Panel{});
    case DType::kQ4_K: return f(Q4_KPanel{});
    case DType::kQ5_K: return f(Q5_KPanel{});
    case DType::kQ6_K: return f(Q6_KPanel{});
    default:
      PAGODA_CHECK(dtype == DType::kQ8_0) << "no interleaved kernel for " << dtype_name(dtype);
      return f(Q8_0Panel{});
  }
}

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
      group, side, [&](int j, const BlockCodes& codes, const __m256* scale, __m256 min) {
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
  with_panel_type(dtype, [&](auto panel) {
    using Panel = decltype(panel);
    PAGODA_CHECK_EQ(k % (32 * Panel::kGroupBlocks), 0) << dtype_name(dtype) << " rows of " << k;
    PAGODA_CHECK_EQ(row_bytes, static_cast<std::size_t>(k / 32 / Panel::kGroupBlocks) *
                                   static_cast<std::size_t>(Panel::kGroupBytes));
    int16::with_row_count<8>(m, [&](auto count) {
      panels_direct<Panel, decltype(count)::value>(rows, scales, scaled_sums, k, panels, row_bytes,
                                                   num_rows, panel_begin, panel_end, y, ldy);
    });
  });
}

}  // namespace pagoda::cpu::avx2
