// AVX-512VL on top of the file's AVX-512F/BW/VNNI flags, as matmul_int16_avx512.cc.
#pragma GCC target("avx512vl")

#include "backend/cpu/matmul_interleaved_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

namespace {

constexpr int kLanes = 16;
constexpr int kUnitBytes = 64;  // one 4-byte unit of each of 16 rows
constexpr std::size_t kPrefetchBytes = 4096;

inline __m512i load_unit(const std::uint8_t* p) {
  return _mm512_loadu_si512(p);
}

inline __m512 load_halves(const std::uint8_t* p) {  // 16 fp16, one per row
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m512 times(__m512 d, __m512i integer) {
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(integer));
}

inline __m512i lane_bits(__m512i v, int shift, int mask) {
  return _mm512_and_si512(_mm512_srli_epi32(v, shift), _mm512_set1_epi32(mask));
}

std::int32_t load_word(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// One block's 8 code units: unsigned[u] (qu, 0-255) and signed_[u] (what l multiplies: qu for the
// types whose qu < 128, qw for Q8_0), unit u covering columns 4u .. 4u + 3.
struct BlockCodes {
  __m512i unsigned_[8];
  __m512i signed_[8];
};

// The per-type reading of a panel group (16 rows' GGUF group g), every block in column order.
//   kSub: sub-blocks per block (2: 16-column scales), kGroupBlocks, kGroupBytes (one row's),
//   kOffset (c above; Q8_0's 128 goes through high_sums)
//   for_each_block(group, f): f(j, codes, scale[kSub], min) for j = 0 .. kGroupBlocks - 1 in order
struct Q8_0Panel {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kSub = 1, kGroupBlocks = 1, kGroupBytes = 34, kOffset = 128;
  static constexpr bool kHasMin = false;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, F&& f) {
    const __m512 d[1] = {load_halves(g)};
    BlockCodes codes;
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      codes.signed_[u] = load_unit(g + 32 + u * kUnitBytes);
      codes.unsigned_[u] = _mm512_xor_si512(codes.signed_[u], _mm512_set1_epi8(char(0x80)));
    }
    f(0, codes, d, _mm512_setzero_ps());
  }
};

// Q4_0 / Q4_1: d | (Q4_1: m) | 4 units of nibbles, unit u's low nibbles columns 4u .. 4u + 3,
// its high ones 16 + 4u ...
template <DType kDType>
struct NibblePanel {
  static constexpr DType kType = kDType;
  static constexpr bool kHasMin = kDType == DType::kQ4_1;
  static constexpr int kSub = 1, kGroupBlocks = 1, kGroupBytes = kHasMin ? 20 : 18;
  static constexpr int kOffset = kHasMin ? 0 : 8;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, F&& f) {
    const __m512 d[1] = {load_halves(g)};
    const __m512 min = kHasMin ? load_halves(g + 32) : _mm512_setzero_ps();
    const std::uint8_t* units = g + (kHasMin ? 64 : 32);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    BlockCodes codes;
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i raw = load_unit(units + u * kUnitBytes);
      codes.unsigned_[u] = _mm512_and_si512(raw, low4);
      codes.unsigned_[4 + u] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
    }
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) codes.signed_[u] = codes.unsigned_[u];
    f(0, codes, d, min);
  }
};
using Q4_0Panel = NibblePanel<DType::kQ4_0>;
using Q4_1Panel = NibblePanel<DType::kQ4_1>;

// Q4_K / Q5_K: d | dmin | the 12 scale bytes as 3 words | (Q5_K: qh, 8 units: bit j of a byte
// is block j's fifth bit) | 4 runs of 8 units, run q's low nibbles block 2q, high nibbles block
// 2q + 1. Scales and mins as int16_blocks.h's k_scales8 forms them.
template <DType kDType>
struct KQuantPanel {
  static constexpr DType kType = kDType;
  static constexpr bool kFifthBit = kDType == DType::kQ5_K;
  static constexpr int kSub = 1, kGroupBlocks = 8, kGroupBytes = kFifthBit ? 176 : 144;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, F&& f) {
    const __m512 d = load_halves(g);
    const __m512 dmin = load_halves(g + 32);
    const __m512i s0 = load_unit(g + 64);
    const __m512i s1 = load_unit(g + 128);
    const __m512i s2 = load_unit(g + 192);
    const __m512i negative = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    const std::uint8_t* fifth = g + 256;
    const std::uint8_t* runs = g + (kFifthBit ? 768 : 256);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    int16::for_each_block<4>([&](auto q_constant) {
      constexpr int q = decltype(q_constant)::value;
      // Blocks 2q and 2q + 1: scale and min bytes (j < 4: s0/s1 byte j; else s2 and the high
      // bits of s0/s1 byte j - 4).
      __m512 scale[2], min[2];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * q + half;
        __m512i sc, m;
        if (j < 4) {
          sc = lane_bits(s0, 8 * j, 63);
          m = lane_bits(s1, 8 * j, 63);
        } else {
          const int b = j - 4;
          sc = _mm512_or_si512(lane_bits(s2, 8 * b, 15), lane_bits(s0, 8 * b + 2, 0x30));
          m = _mm512_or_si512(lane_bits(s2, 8 * b + 4, 15), lane_bits(s1, 8 * b + 2, 0x30));
        }
        scale[half] = times(d, sc);
        min[half] = _mm512_castsi512_ps(
            _mm512_xor_si512(_mm512_castps_si512(times(dmin, m)), negative));  // -(dmin * m)
      }
      const std::uint8_t* run = runs + q * 8 * kUnitBytes;
      int16::for_each_block<2>([&](auto half_constant) {
        constexpr int j = 2 * q + decltype(half_constant)::value;
        BlockCodes codes;
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) {
          __m512i nibble = load_unit(run + u * kUnitBytes);
          if constexpr (j % 2 == 1) nibble = _mm512_srli_epi16(nibble, 4);
          codes.unsigned_[u] = _mm512_and_si512(nibble, low4);
          if constexpr (kFifthBit) {  // bit j of the qh byte to bit 4
            __m512i bit = load_unit(fifth + u * kUnitBytes);
            if constexpr (j < 4) bit = _mm512_slli_epi16(bit, 4 - j);
            if constexpr (j > 4) bit = _mm512_srli_epi16(bit, j - 4);
            codes.unsigned_[u] =
                _mm512_ternarylogic_epi32(codes.unsigned_[u], bit, _mm512_set1_epi8(0x10), 0xF8);
          }
          codes.signed_[u] = codes.unsigned_[u];
        }
        f(j, codes, &scale[j % 2], min[j % 2]);
      });
    });
  }
};
using Q4_KPanel = KQuantPanel<DType::kQ4_K>;
using Q5_KPanel = KQuantPanel<DType::kQ5_K>;

// Q6_K: d | 16 int8 scales (16 bytes each) | per 128-column half h: ql runs 2h and 2h + 1 (8
// units each), then qh run h (8 units). Block 4h + jj: ql run 2h + jj % 2, nibble jj / 2, qh bits
// 2 jj; qu = q6 (qw = q6 - 32).
struct Q6_KPanel {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kSub = 2, kGroupBlocks = 8, kGroupBytes = 210, kOffset = 32;
  static constexpr bool kHasMin = false;
  template <typename F>
  static void for_each_block(const std::uint8_t* g, F&& f) {
    const __m512 d = load_halves(g);
    const std::uint8_t* scales = g + 32;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i high2 = _mm512_set1_epi8(0x30);
    int16::for_each_block<8>([&](auto j_constant) {
      constexpr int j = decltype(j_constant)::value;
      constexpr int h = j / 4, jj = j % 4;
      const std::uint8_t* half = g + 32 + 256 + h * 1536;
      const std::uint8_t* ql = half + (jj % 2) * 8 * kUnitBytes;
      const std::uint8_t* qh = half + 16 * kUnitBytes;
      __m512 scale[2];
#pragma GCC unroll 2
      for (int t = 0; t < 2; ++t) {
        const __m128i bytes =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + (2 * j + t) * kLanes));
        scale[t] = times(d, _mm512_cvtepi8_epi32(bytes));
      }
      BlockCodes codes;
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        __m512i low = load_unit(ql + u * kUnitBytes);
        if constexpr (jj / 2 == 1) low = _mm512_srli_epi16(low, 4);
        __m512i high = load_unit(qh + u * kUnitBytes);  // bits 2 jj, 2 jj + 1 to bits 4, 5
        if constexpr (2 * jj < 4) high = _mm512_slli_epi16(high, 4 - 2 * jj);
        if constexpr (2 * jj > 4) high = _mm512_srli_epi16(high, 2 * jj - 4);
        // (low & 0x0F) | (high & 0x30)
        codes.unsigned_[u] = _mm512_ternarylogic_epi32(_mm512_and_si512(low, low4), high, high2,
                                                       0xF8);  // a | (b & c)
        codes.signed_[u] = codes.unsigned_[u];
      }
      f(j, codes, scale, _mm512_setzero_ps());
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

// flatten: every block's lambda inlined, so a block's 16 code vectors stay in registers.
template <typename Panel, int kRows>
__attribute__((flatten)) void panels_direct(const Int16XBytes& x, std::int64_t k,
                                            const std::uint8_t* panels, std::size_t row_bytes,
                                            std::int64_t num_rows, std::int64_t panel_begin,
                                            std::int64_t panel_end, float* y, std::int64_t ldy) {
  constexpr int kSub = Panel::kSub;
  constexpr int kUnitsPerSub = 8 / kSub;
  const std::int64_t num_blocks = k / 32;
  const std::int64_t groups = num_blocks / Panel::kGroupBlocks;
  const std::size_t group_bytes = static_cast<std::size_t>(Panel::kGroupBytes) * kLanes;
  const std::size_t panel_bytes = row_bytes * kLanes;
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::uint8_t* panel = panels + static_cast<std::size_t>(p) * panel_bytes;
    __m512 acc[kRows];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::uint8_t* group = panel + static_cast<std::size_t>(g) * group_bytes;
      // The bytes kPrefetchBytes ahead of this group, one line at a time: the stream is
      // sequential, but the hardware prefetcher alone leaves the K-quants' longer groups
      // waiting on memory.
      for (std::size_t line = 0; line < group_bytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(group + kPrefetchBytes + line), _MM_HINT_T0);
      }
      Panel::for_each_block(group, [&](int j, const BlockCodes& codes, const __m512* scale,
                                       __m512 min) {
        const std::int64_t b = g * Panel::kGroupBlocks + j;
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) {
          const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
          const std::int8_t* h = x.high.data() + i * k + b * 32;
          const std::uint8_t* l = x.low.data() + i * k + b * 32;
          const __m512 s = _mm512_set1_ps(x.scales[xb]);
#pragma GCC unroll 2
          for (int t = 0; t < kSub; ++t) {
            __m512i high = _mm512_setzero_si512();
            __m512i low = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int u = t * kUnitsPerSub; u < (t + 1) * kUnitsPerSub; ++u) {
              high = _mm512_dpbusd_epi32(high, codes.unsigned_[u],
                                         _mm512_set1_epi32(load_word(h + 4 * u)));
              low = _mm512_dpbusd_epi32(low, _mm512_set1_epi32(load_word(l + 4 * u)),
                                        codes.signed_[u]);
            }
            if constexpr (Panel::kType == DType::kQ8_0) {
              high = _mm512_sub_epi32(high, _mm512_set1_epi32(128 * x.high_sums[xb]));
            }
            __m512i dot = _mm512_add_epi32(_mm512_slli_epi32(high, 8), low);
            if constexpr (Panel::kOffset != 0 && Panel::kType != DType::kQ8_0) {
              const std::int32_t qsum =
                  kSub == 1 ? x.qsums[xb] : x.half_sums[static_cast<std::size_t>(2 * xb + t)];
              dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(Panel::kOffset * qsum));
            }
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale[t], s), acc[i]);
            if constexpr (Panel::kHasMin) {
              acc[i] = _mm512_fmadd_ps(min, _mm512_set1_ps(x.scaled_sums[xb]), acc[i]);
            }
          }
        }
      });
    }
    const std::int64_t n0 = p * kLanes;
    const auto lanes = static_cast<__mmask16>(
        (1u << static_cast<unsigned>(std::min<std::int64_t>(kLanes, num_rows - n0))) - 1);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(y + i * ldy + n0, lanes, acc[i]);
  }
}

}  // namespace

void interleaved_direct(DType dtype, const Int16XBytes& x, std::int64_t m, std::int64_t k,
                        const std::uint8_t* panels, std::size_t row_bytes, std::int64_t num_rows,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t ldy) {
  with_panel_type(dtype, [&](auto panel) {
    using Panel = decltype(panel);
    PAGODA_CHECK_EQ(k % (32 * Panel::kGroupBlocks), 0) << dtype_name(dtype) << " rows of " << k;
    PAGODA_CHECK_EQ(row_bytes, static_cast<std::size_t>(k / 32 / Panel::kGroupBlocks) *
                                   static_cast<std::size_t>(Panel::kGroupBytes));
    int16::with_row_count<8>(m, [&](auto rows) {
      panels_direct<Panel, decltype(rows)::value>(x, k, panels, row_bytes, num_rows, panel_begin,
                                                  panel_end, y, ldy);
    });
  });
}

}  // namespace pagoda::cpu::avx512
