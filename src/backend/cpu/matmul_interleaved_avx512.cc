// AVX-512VL on top of the file's AVX-512F/BW/VNNI flags, as matmul_int16_avx512.cc.
#pragma GCC target("avx512vl")

#include "backend/cpu/matmul_interleaved_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_panel_readers.h"
#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

namespace {

constexpr int kLanes = 16;
constexpr std::size_t kPrefetchBytes = 4096;

// The panel readers' view (interleaved_panel_readers.h): all 16 rows in a zmm.
struct Lanes16 {
  using Int = __m512i;
  using Float = __m512;
  Int unit(const std::uint8_t* p) const { return _mm512_loadu_si512(p); }
  Float halves(const std::uint8_t* p) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  Int bytes(const std::uint8_t* p) const {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Int and_(Int a, Int b) { return _mm512_and_si512(a, b); }
  static Int or_(Int a, Int b) { return _mm512_or_si512(a, b); }
  static Int srli16(Int v, int n) { return _mm512_srli_epi16(v, n); }
  static Int slli16(Int v, int n) { return _mm512_slli_epi16(v, n); }
  static Int srli32(Int v, int n) { return _mm512_srli_epi32(v, n); }
  static Int mullo32(Int a, Int b) { return _mm512_mullo_epi32(a, b); }
  static Int set1_8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
  static Int set1_32(int v) { return _mm512_set1_epi32(v); }
  static Float zero() { return _mm512_setzero_ps(); }
  static Float times(Float d, Int integer) { return _mm512_mul_ps(d, _mm512_cvtepi32_ps(integer)); }
  static Float negate(Float v) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
};

std::int32_t load_word(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// flatten: every block's lambda inlined, so a block's 16 code vectors stay in registers.
// kInt8: x's codes are int8-range (cpu_int8_activations()), so l, read as signed bytes, is q
// itself, and one vpdpbusd per unit (unsigned codes qu by q) replaces the two on h and l:
// dot(qw, q) = dot(qu, q) - c qsum, c = 128 for Q8_0 and the type's offset otherwise.
template <typename Panel, int kRows, bool kInt8>
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
      Panel::for_each_block(
          Lanes16{}, group,
          [&](int j, const panels::BlockCodes<__m512i>& codes, const __m512* scale, __m512 min) {
            const std::int64_t b = g * Panel::kGroupBlocks + j;
            // What h multiplies (unsigned codes: Q8_0's shifted by 128) and what l does (signed).
            __m512i code_u[8];
#pragma GCC unroll 8
            for (int u = 0; u < 8; ++u) {
              code_u[u] = Panel::kSigned
                              ? _mm512_xor_si512(codes.units[u], _mm512_set1_epi8(char(0x80)))
                              : codes.units[u];
            }
#pragma GCC unroll 8
            for (int i = 0; i < kRows; ++i) {
              const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
              const std::int8_t* h = x.high.data() + i * k + b * 32;
              const std::uint8_t* l = x.low.data() + i * k + b * 32;
              const __m512 s = _mm512_set1_ps(x.scales[xb]);
#pragma GCC unroll 2
              for (int t = 0; t < kSub; ++t) {
                const std::int32_t qsum =
                    kSub == 1 ? x.qsums[xb] : x.half_sums[static_cast<std::size_t>(2 * xb + t)];
                if constexpr (kInt8) {
                  constexpr int kCodeOffset = Panel::kSigned ? 128 : Panel::kOffset;
                  __m512i dot = _mm512_set1_epi32(-kCodeOffset * qsum);
#pragma GCC unroll 8
                  for (int u = t * kUnitsPerSub; u < (t + 1) * kUnitsPerSub; ++u) {
                    dot = _mm512_dpbusd_epi32(dot, code_u[u],
                                              _mm512_set1_epi32(load_word(l + 4 * u)));
                  }
                  acc[i] =
                      _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale[t], s), acc[i]);
                  if constexpr (Panel::kHasMin) {
                    acc[i] = _mm512_fmadd_ps(min, _mm512_set1_ps(x.scaled_sums[xb]), acc[i]);
                  }
                  continue;
                }
                __m512i high = _mm512_setzero_si512();
                __m512i low = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int u = t * kUnitsPerSub; u < (t + 1) * kUnitsPerSub; ++u) {
                  high =
                      _mm512_dpbusd_epi32(high, code_u[u], _mm512_set1_epi32(load_word(h + 4 * u)));
                  low = _mm512_dpbusd_epi32(low, _mm512_set1_epi32(load_word(l + 4 * u)),
                                            codes.units[u]);
                }
                if constexpr (Panel::kSigned) {
                  high = _mm512_sub_epi32(high, _mm512_set1_epi32(128 * x.high_sums[xb]));
                }
                __m512i dot = _mm512_add_epi32(_mm512_slli_epi32(high, 8), low);
                if constexpr (Panel::kOffset != 0) {
                  dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(Panel::kOffset * qsum));
                }
                acc[i] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale[t], s), acc[i]);
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
  PAGODA_CHECK(interleave_supported(dtype)) << "no interleaved kernel for " << dtype_name(dtype);
  panels::with_reader(dtype, [&](auto panel) {
    using Panel = decltype(panel);
    PAGODA_CHECK_EQ(k % (32 * Panel::kGroupBlocks), 0) << dtype_name(dtype) << " rows of " << k;
    PAGODA_CHECK_EQ(row_bytes, static_cast<std::size_t>(k / 32 / Panel::kGroupBlocks) *
                                   static_cast<std::size_t>(Panel::kGroupBytes));
    const bool int8 = cpu_int8_activations();
    int16::with_row_count<8>(m, [&](auto rows) {
      constexpr int kRows = decltype(rows)::value;
      auto* kernel = int8 ? panels_direct<Panel, kRows, true> : panels_direct<Panel, kRows, false>;
      kernel(x, k, panels, row_bytes, num_rows, panel_begin, panel_end, y, ldy);
    });
  });
}

}  // namespace pagoda::cpu::avx512
