#include "backend/cpu/matmul_interleaved_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/avxvnni_region.h"
#include "backend/cpu/cpu_features.h"
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
// or, for int8 codes, their 4 bytes; and q's sum per 16 columns (what the codes' offsets take off).
struct XRow {
  const std::int32_t* even;   // [k / 4]
  const std::int32_t* odd;    // [k / 4]
  const std::int32_t* quads;  // [k / 4], int8 codes only
  const std::int32_t* sums;   // [k / 16]
};

struct XForms {
  std::vector<std::int32_t> even, odd, quads, sums;
};

void make_x_forms(const std::int16_t* q, std::int64_t m, std::int64_t k, bool int8, XForms& x) {
  const auto units = static_cast<std::size_t>(m * k / 4);
  x.even.resize(int8 ? 0 : units);
  x.odd.resize(int8 ? 0 : units);
  x.quads.resize(int8 ? units : 0);
  x.sums.resize(static_cast<std::size_t>(m * k / 16));
  const auto word = [](std::int16_t low, std::int16_t high) {
    return static_cast<std::int32_t>(
        static_cast<std::uint16_t>(low) |
        (static_cast<std::uint32_t>(static_cast<std::uint16_t>(high)) << 16));
  };
  for (std::size_t u = 0; u < units; ++u) {
    const std::int16_t* c = q + 4 * u;
    if (int8) {
      std::uint32_t quad = 0;
      for (int j = 0; j < 4; ++j) {
        quad |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(c[j])) << (8 * j);
      }
      x.quads[u] = static_cast<std::int32_t>(quad);
    } else {
      x.even[u] = word(c[0], c[2]);
      x.odd[u] = word(c[1], c[3]);
    }
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

// panels_direct twice: plain AVX2, and with AVX-VNNI's VEX vpdpwssd where the CPU has it
// (cpu_int16_avx_vnni()).
namespace plain {
#define PAGODA_INT16_DOT_ADD(acc, x, w) _mm256_add_epi32(acc, _mm256_madd_epi16(x, w))
#include "backend/cpu/matmul_interleaved_avx2_kernel.inc"
#undef PAGODA_INT16_DOT_ADD
}  // namespace plain

PAGODA_AVXVNNI_BEGIN
namespace vnni {
#define PAGODA_INT16_DOT_ADD(acc, x, w) _mm256_dpwssd_avx_epi32(acc, x, w)
#define PAGODA_BYTE_DOT_ADD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#include "backend/cpu/matmul_interleaved_avx2_kernel.inc"
#undef PAGODA_BYTE_DOT_ADD
#undef PAGODA_INT16_DOT_ADD
}  // namespace vnni
PAGODA_AVXVNNI_END

}  // namespace

void interleaved_direct(DType dtype, const std::int16_t* q, const float* scales,
                        const float* scaled_sums, std::int64_t m, std::int64_t k,
                        const std::uint8_t* panels, std::size_t row_bytes, std::int64_t num_rows,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t ldy) {
  PAGODA_CHECK(m >= 1 && m <= 8) << m << " rows of x";
  // int8 codes go through byte products where AVX-VNNI has them (else as int16, the same bits).
  const bool avx_vnni = cpu_int16_avx_vnni();
  const bool int8 = avx_vnni && cpu_int8_activations();
  thread_local XForms forms;
  make_x_forms(q, m, k, int8, forms);
  XRow rows[8];
  for (std::int64_t i = 0; i < m; ++i) {
    rows[i] = {.even = forms.even.data() + (int8 ? 0 : i * k / 4),
               .odd = forms.odd.data() + (int8 ? 0 : i * k / 4),
               .quads = forms.quads.data() + (int8 ? i * k / 4 : 0),
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
        constexpr int kRows = decltype(count)::value;
        auto* kernel = int8       ? vnni::panels_direct<Panel, kRows, true>
                       : avx_vnni ? vnni::panels_direct<Panel, kRows, false>
                                  : plain::panels_direct<Panel, kRows, false>;
        kernel(rows + i0, scales + i0 * num_blocks, scaled_sums + i0 * num_blocks, k, panels,
               row_bytes, num_rows, panel_begin, panel_end, y + i0 * ldy, ldy);
      });
    }
  });
}

}  // namespace pagoda::cpu::avx2
