// AVX-512VL on top of the file's AVX-512F/BW/VNNI flags (every VNNI CPU has it): the compiler then
// merges int16_blocks.h's 256-bit and/or/shift chains into vpternlog and uses ymm16-31 (Q5_K's
// direct kernel 10% faster, one thread, L2-resident 512x2048).
#pragma GCC target("avx512vl")

#include "backend/cpu/matmul_int16_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/int16_tile_avx512.h"
#include "backend/cpu/int16_tile_rows.h"
#include "backend/cpu/int16_tile_rows_avx512.h"
#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx512 {

void quantize_columns_int16(const float* xt, std::int64_t k, std::int64_t vectors,
                            std::int32_t* pairs, float* scales, float* scaled_sums) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const std::int64_t width = 16 * vectors;
  const __m512 code_max = _mm512_set1_ps(cpu_activation_code_max());
  const __m512i low_half = _mm512_set1_epi32(0xFFFF);
  for (std::int64_t b = 0; b < k / kInt16Block; ++b) {
    for (std::int64_t v = 0; v < vectors; ++v) {
      const float* column = xt + b * kInt16Block * width + v * 16;
      const ColumnBlock block = column_block_scale(column, width, code_max);
      __m512i qsum = _mm512_setzero_si512();
      std::int32_t* out = pairs + b * (kInt16Block / 2) * width + v * 16;
      for (int p = 0; p < kInt16Block / 2; ++p) {
        const __m512i q0 = column_codes(column, width, 2 * p, block.to_int);
        const __m512i q1 = column_codes(column, width, 2 * p + 1, block.to_int);
        qsum = _mm512_add_epi32(qsum, _mm512_add_epi32(q0, q1));
        _mm512_storeu_si512(out + p * width, _mm512_or_si512(_mm512_and_si512(q0, low_half),
                                                             _mm512_slli_epi32(q1, 16)));
      }
      _mm512_storeu_ps(scales + b * width + v * 16, block.s);
      _mm512_storeu_ps(scaled_sums + b * width + v * 16,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(qsum), block.s));
    }
  }
}

void quantize_rows_int16(const float* x, std::int64_t m, std::int64_t k, std::int16_t* q,
                         float* scales, float* scaled_sums, std::int32_t* qsums) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const std::int64_t num_blocks = k / kInt16Block;
  const __m512 float_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  const float code_max = cpu_activation_code_max();
  // The same fp32 operations as quantize_columns_int16, one block's 32 columns at a time.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      const float* xb = x + i * k + b * kInt16Block;
      const __m512 lo = _mm512_loadu_ps(xb);
      const __m512 hi = _mm512_loadu_ps(xb + 16);
      const __m512 mag_lo = _mm512_abs_ps(lo);
      const __m512 mag_hi = _mm512_abs_ps(hi);
      const bool non_finite = (_mm512_cmp_ps_mask(mag_lo, float_max, _CMP_NLE_UQ) |
                               _mm512_cmp_ps_mask(mag_hi, float_max, _CMP_NLE_UQ)) != 0;
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(mag_lo, mag_hi));
      const float s = non_finite ? std::numeric_limits<float>::quiet_NaN() : amax / code_max;
      const __m512 to_int = _mm512_set1_ps(!non_finite && amax > 0.0f ? code_max / amax : 0.0f);
      const __m512i q_lo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, to_int));
      const __m512i q_hi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, to_int));
      std::int16_t* out = q + i * k + b * kInt16Block;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(q_lo));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm512_cvtepi32_epi16(q_hi));
      const std::int32_t qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
      const std::size_t at = static_cast<std::size_t>(i * num_blocks + b);
      scales[at] = s;
      scaled_sums[at] = static_cast<float>(qsum) * s;
      qsums[at] = qsum;
    }
  }
}

void split_rows_int16(const std::int16_t* q, std::int64_t m, std::int64_t k, Int16XBytes& x) {
  PAGODA_CHECK_EQ(k % kInt16Block, 0) << "int16 activations come in blocks of 32 columns";
  const auto n = static_cast<std::size_t>(m * k);
  x.high.resize(n);
  x.low.resize(n);
  x.high_sums.resize(n / 32);
  x.half_sums.resize(n / 16);
  const __m512i ones = _mm512_set1_epi16(1);
  for (std::size_t c = 0; c < n; c += 32) {
    const __m512i v = _mm512_loadu_si512(q + c);
    const __m512i h = _mm512_srai_epi16(v, 8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.high.data() + c), _mm512_cvtepi16_epi8(h));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.low.data() + c), _mm512_cvtepi16_epi8(v));
    x.high_sums[c / 32] = _mm512_reduce_add_epi32(_mm512_madd_epi16(h, ones));
    const __m512i pairs = _mm512_madd_epi16(v, ones);  // lanes 0-7: columns 0-15
    x.half_sums[c / 16] = _mm512_mask_reduce_add_epi32(0x00FF, pairs);
    x.half_sums[c / 16 + 1] = _mm512_mask_reduce_add_epi32(0xFF00, pairs);
  }
}

namespace {

using int16::with_int16_block;

// x as int16 column pairs for tile_typed (int16_tile_avx512.h): a sub-block's first pair starts
// its sums with vpmaddwd (no zeroing), vpdpwssd adds each next.
struct Int16Pairs {
  static constexpr int kUnits = kInt16Block / 2;
  const std::int32_t* units;
  const float* scales;
  const float* scaled_sums;

  template <int kSub, int kWidth>
  __m512i start(std::int64_t /*b*/, int /*t*/, int /*v*/) const {
    return _mm512_setzero_si512();
  }
  static __m512i first(__m512i /*start*/, __m512i w, __m512i x) { return _mm512_madd_epi16(x, w); }
  static __m512i mac(__m512i sum, __m512i w, __m512i x) { return _mm512_dpwssd_epi32(sum, x, w); }
  static __m512i half_step(__m512i half, __m512i x, bool first) {
    const __m512i ones = _mm512_set1_epi16(1);
    return first ? _mm512_madd_epi16(x, ones) : _mm512_dpwssd_epi32(half, x, ones);
  }
  static __m512 half_sums(__m512i half, __m512i /*start*/) { return _mm512_cvtepi32_ps(half); }
};

// 16 vectors of 16 int32 lanes, p[s] the vpmaddwd of weight row s with x (lane l: columns 2l and
// 2l + 1), summed per row: lane s of half[0] is row s's sum over columns 0-15, of half[1] over
// columns 16-31. Three levels of adds, each on pairs rearranged within or across 128-bit chunks:
//   u: per chunk, lanes 0, 2 hold row 2i's partial sums and 1, 3 row 2i + 1's
//   v: per chunk c, lane r holds row 4i + r's sum over chunk c (columns 8c .. 8c + 7)
//   w: chunks (rows 8i..8i+3, half 0), (same, half 1), (rows 8i+4..8i+7, half 0), (half 1)
inline void sum_rows(const __m512i p[16], __m512i half[2]) {
  __m512i u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    u[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
                            _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
  }
  __m512i v[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * i], u[2 * i + 1]),
                            _mm512_unpackhi_epi64(u[2 * i], u[2 * i + 1]));
  }
  __m512i w[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    w[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  half[0] = _mm512_shuffle_i64x2(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0));
  half[1] = _mm512_shuffle_i64x2(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1));
}

// A direct group's lanes: lane r reads the row r * lane_stride rows past w (lanes past `count`
// read the last row again; their sums are not stored), at the byte offsets the gathers take.
struct LaneRows {
  LaneRows(const std::uint8_t* w, std::size_t w_stride, int count, std::int64_t lane_stride) {
    for (int r = 0; r < kInt16DirectGroup; ++r) {
      const std::size_t offset =
          static_cast<std::size_t>(std::min(r, count - 1) * lane_stride) * w_stride;
      rows[r] = w + offset;
      offsets[r] = static_cast<std::int32_t>(offset);
    }
  }
  const std::uint8_t* rows[kInt16DirectGroup];
  alignas(64) std::int32_t offsets[kInt16DirectGroup];
};

// A one-block group's fp16 scale (and min above it) for the 16 lanes' rows, one gather at
// `group` + offsets[r]: int16_blocks.h's layout.
template <typename Block>
void one_block_scales(const std::int32_t* offsets, const std::uint8_t* group, float* scale,
                      float* min) {
  const __m512i header = _mm512_i32gather_epi32(_mm512_load_si512(offsets), group, 1);
  _mm512_store_ps(scale, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(header)));
  if constexpr (Block::kHasMin) {
    _mm512_store_ps(min, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(header, 16))));
  }
}

// y[i, r * lane_stride] = lane r of acc[i] for the group's `count` lanes.
template <int kRows>
void store_lanes(const __m512 (&acc)[kRows], int count, std::int64_t lane_stride, float* y,
                 std::int64_t ldy) {
  if (lane_stride == 1) {
    const auto lanes = static_cast<__mmask16>((1u << count) - 1);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(y + i * ldy, lanes, acc[i]);
    return;
  }
  for (int i = 0; i < kRows; ++i) {
    alignas(64) float lanes[kInt16DirectGroup];
    _mm512_store_ps(lanes, acc[i]);
    for (int r = 0; r < count; ++r) y[i * ldy + r * lane_stride] = lanes[r];
  }
}

// One group of up to 16 weight rows (lane r: the row at w + r * lane_stride rows, y likewise)
// against kRows rows of x. Per stored group (1 or 8 blocks) the 16 rows' scales in two gathers;
// per block each row's 32 quants as int16, one vpmaddwd per row of x, the 16 products summed
// lane-wise (lane r: row r's exact sub-block dots), then the block joins the fp32 accumulators
// exactly as in int16_tile. Unless `last`, each lane's next row (the next group's) is prefetched
// meanwhile.
template <typename Block, int kRows>
void int16_direct_group(const std::int16_t* q, const float* scales, const float* scaled_sums,
                        std::int64_t k, const std::uint8_t* w, std::size_t w_stride, int count,
                        std::int64_t lane_stride, bool last, float* y, std::int64_t ldy) {
  constexpr int kSub = Block::kSubBlocks;
  constexpr int kGroup = Block::kGroupBlocks;
  // Q2_K: mins per 16 columns need x's sums per 16 columns, summed here from q.
  constexpr bool kHalfSums = kSub == 2 && Block::kHasMin;
  const std::int64_t num_blocks = k / kInt16Block;
  const LaneRows lanes(w, w_stride, count, lane_stride);
  const std::uint8_t* const* rows = lanes.rows;
  const std::int32_t* offsets = lanes.offsets;
  const __m256i offsets_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
  const __m256i offsets_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 8));
  alignas(64) float group_scale[kGroup * kSub][16];
  alignas(64) float group_min[kGroup * kSub][16];
  __m512 acc[kRows];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
  for (std::int64_t g = 0; g < num_blocks / kGroup; ++g) {
    const std::size_t at = static_cast<std::size_t>(g) * Block::kGroupBytes;
    if constexpr (kGroup == 1) {
      one_block_scales<Block>(offsets, w + at, group_scale[0], group_min[0]);
    } else {
      Block::scales8(w + at, offsets_low, group_scale[0], group_min[0], 16);
      Block::scales8(w + at, offsets_high, group_scale[0] + 8, group_min[0] + 8, 16);
    }
    int16::for_each_block<kGroup>([&](auto j) {
      const std::int64_t b = g * kGroup + j;
      // The next group's rows, a block's bytes at a time (a whole group's lines at once would
      // queue up to 64 prefetches behind each other).
      if (!last) {
#pragma GCC unroll 16
        for (int r = 0; r < kInt16DirectGroup; ++r) {
          __builtin_prefetch(rows[r] + w_stride + at + j * Block::kGroupBytes / kGroup, /*rw=*/0,
                             /*locality=*/3);
        }
      }
      // All 16 rows' quants stay in registers while each row of x passes over them.
      __m512i wq[kInt16DirectGroup];
#pragma GCC unroll 16
      for (int r = 0; r < kInt16DirectGroup; ++r) {
        wq[r] = _mm512_cvtepi8_epi16(Block::quants(rows[r] + at, j));
      }
      __m512 d[kSub];
      __m512 min[kSub];
#pragma GCC unroll 2
      for (int t = 0; t < kSub; ++t) {
        d[t] = _mm512_load_ps(group_scale[j * kSub + t]);
        if constexpr (Block::kHasMin) min[t] = _mm512_load_ps(group_min[j * kSub + t]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) {
        const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
        const __m512i xv = _mm512_loadu_si512(q + i * k + b * kInt16Block);
        __m512i products[kInt16DirectGroup];
#pragma GCC unroll 16
        for (int r = 0; r < kInt16DirectGroup; ++r) products[r] = _mm512_madd_epi16(wq[r], xv);
        __m512i half[2];
        sum_rows(products, half);
        __m512i dot[kSub];
        if constexpr (kSub == 1) {
          dot[0] = _mm512_add_epi32(half[0], half[1]);
        } else {
          dot[0] = half[0];
          dot[1] = half[1];
        }
        const __m512 s = _mm512_set1_ps(scales[xb]);
        float scaled_sum[kSub];
        if constexpr (kHalfSums) {
          // Lanes 0-7 of the pair sums hold columns 0-15, lanes 8-15 columns 16-31.
          const __m512i pair_sums = _mm512_madd_epi16(xv, _mm512_set1_epi16(1));
          scaled_sum[0] =
              static_cast<float>(_mm512_mask_reduce_add_epi32(0x00FF, pair_sums)) * scales[xb];
          scaled_sum[1] =
              static_cast<float>(_mm512_mask_reduce_add_epi32(0xFF00, pair_sums)) * scales[xb];
        } else {
          scaled_sum[0] = scaled_sums[xb];
        }
#pragma GCC unroll 2
        for (int t = 0; t < kSub; ++t) {
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(d[t], s), acc[i]);
          if constexpr (Block::kHasMin) {
            acc[i] = _mm512_fmadd_ps(min[t], _mm512_set1_ps(scaled_sum[t]), acc[i]);
          }
        }
      }
    });
  }
  store_lanes<kRows>(acc, count, lane_stride, y, ldy);
}

// The VNNI direct kernel's codes: two blocks of a row in one zmm as unsigned bytes qu = qw + c,
// the block's own quants plus the type's offset c (0 where the codes are unsigned already).
//   Q4_K: blocks j, j + 1 (j even) of a group are one 32-byte run's low and high nibbles: a
//         broadcast load, a variable shift and a mask.
//   Q4_0: each block's 16 bytes of nibbles (columns 0-15 low, 16-31 high) broadcast to a
//         256-bit half, then the same shift and mask; c = 8.
//   Q8_0: the two blocks' int8 quants, each 32 bytes, with the sign bit flipped (c = 128).
// The types int16_direct_group_vnni takes. One thread, Llama-1B shapes, cold weights, AMD EPYC
// Zen 5 (G weights/s, vpmaddwd -> VNNI): Q4_K 26-28 -> 31-35, Q8_0 21-23 -> 24-27; 1B decode
// Q4_0 22.0 -> 24.4 tok/s. Q4_1 measured the same both ways (25-27; the default model 200 tok/s),
// so it keeps vpmaddwd, as do Q5_0/Q5_1 and Q5_K (their fifth bits are spread by shuffles) and
// the two-sub-block K-quants (their dots are per 16 columns).
template <typename Block>
constexpr bool kVnniDirect =
    Block::kType == DType::kQ4_K || Block::kType == DType::kQ4_0 || Block::kType == DType::kQ8_0;

template <typename Block>
constexpr int kVnniOffset = Block::kType == DType::kQ4_0   ? 8
                            : Block::kType == DType::kQ8_0 ? 128
                                                           : 0;

// Per 16-bit lane shift counts: 0 for the low 128 (256) bits of each half, 4 for the high.
inline __m512i nibble_shifts_halves() {
  return _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
}
inline __m512i nibble_shifts_quarters() {
  return _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                          0x0004000400040004, 0, 0);
}

// Block j0 at g0 and block j1 at g1 of one row (bytes of a group each).
template <typename Block>
inline __m512i vnni_codes_pair(const std::uint8_t* g0, int j0, const std::uint8_t* g1) {
  if constexpr (Block::kType == DType::kQ4_K) {
    const __m512i run = _mm512_broadcast_i64x4(int16::load_256(g0 + 16 + 32 * (j0 / 2)));
    return _mm512_and_si512(_mm512_srlv_epi16(run, nibble_shifts_halves()), _mm512_set1_epi8(0x0F));
  } else if constexpr (Block::kType == DType::kQ8_0) {
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(int16::load_256(g0 + 2)),
                                            int16::load_256(g1 + 2), 1);
    return _mm512_xor_si512(both, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    static_assert(Block::kType == DType::kQ4_0);
    const auto half = [](const std::uint8_t* g) {  // the nibbles, after the fp16 d
      return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 2)));
    };
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(half(g0)), half(g1), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(both, nibble_shifts_quarters()),
                            _mm512_set1_epi8(0x0F));
  }
}

// int16_direct_group's contract with VNNI's byte products, two blocks per zmm: the unsigned
// codes qu = qw + c of a row's blocks b and b + 1 take 64 byte lanes (vnni_codes_pair), x's h and
// l of the same columns likewise, and
//
//   dot(qw, q) = 256 dot(qu, h) + dot(l, qu) - c qsum     (qu < 128: the 4-bit types)
//   dot(qw, q) = 256 (dot(qu, h) - c sum(h)) + dot(l, qw)  (Q8_0, whose qu do not fit a signed
//   byte)
//
// (qsum: the block's sum of q) as vpdpbusd(qu unsigned, h signed), a shift, vpdpbusd(l unsigned,
// qu or qw signed), then one correction per block shared by every row. The same exact int32
// block dots as vpmaddwd's, in fewer instructions (no sign extension, the accumulation built in,
// one transposing sum for two blocks), then the same fp32 steps in the same order, so the same
// bits.
template <typename Block, int kRows>
void int16_direct_group_vnni(const Int16XBytes& x, const float* scales, const float* scaled_sums,
                             const std::int32_t* qsums, std::int64_t k, const std::uint8_t* w,
                             std::size_t w_stride, int count, std::int64_t lane_stride, bool last,
                             float* y, std::int64_t ldy) {
  static_assert(kVnniDirect<Block>);
  constexpr int kGroup = Block::kGroupBlocks;
  constexpr int kOffset = kVnniOffset<Block>;
  const std::int64_t num_blocks = k / kInt16Block;
  const LaneRows lanes(w, w_stride, count, lane_stride);
  const std::uint8_t* const* rows = lanes.rows;
  const std::int32_t* offsets = lanes.offsets;
  const __m256i offsets_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
  const __m256i offsets_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 8));
  // The scales and mins of the blocks in flight: a K-quant group's 8, or two one-block groups'.
  alignas(64) float block_scale[8][16];
  alignas(64) float block_min[8][16];
  __m512 acc[kRows];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
  // Blocks b (block j0 of the group at byte g0 of each row, scales in slot s0) and b + 1 (at g1,
  // slot s1), or b alone when `single` (an odd last block: its second half is x's zeros).
  const auto pair = [&](std::int64_t b, std::size_t g0, int j0, int s0, std::size_t g1, int s1,
                        bool single) {
    __m512i qu[kInt16DirectGroup];
#pragma GCC unroll 16
    for (int r = 0; r < kInt16DirectGroup; ++r) {
      qu[r] = vnni_codes_pair<Block>(rows[r] + g0, j0, rows[r] + g1);
    }
    const __m512 d0 = _mm512_load_ps(block_scale[s0]);
    const __m512 d1 = _mm512_load_ps(block_scale[s1]);
    __m512 min0 = _mm512_setzero_ps(), min1 = _mm512_setzero_ps();
    if constexpr (Block::kHasMin) {
      min0 = _mm512_load_ps(block_min[s0]);
      min1 = _mm512_load_ps(block_min[s1]);
    }
    const __mmask64 lanes = single ? 0x00000000FFFFFFFFull : ~0ull;
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const std::size_t xc = static_cast<std::size_t>(i * k + b * kInt16Block);
      const __m512i h = _mm512_maskz_loadu_epi8(lanes, x.high.data() + xc);
      const __m512i l = _mm512_maskz_loadu_epi8(lanes, x.low.data() + xc);
      __m512i sums[kInt16DirectGroup];
#pragma GCC unroll 16
      for (int r = 0; r < kInt16DirectGroup; ++r) {
        // The second pass's signed operand: qu where it is below 128 (every type but Q8_0),
        // else qw itself (qu with the sign bit flipped back), with no offset to take off.
        const __m512i second =
            kOffset >= 128 ? _mm512_xor_si512(qu[r], _mm512_set1_epi8(static_cast<char>(0x80)))
                           : qu[r];
        const __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qu[r], h);
        sums[r] = _mm512_dpbusd_epi32(_mm512_slli_epi32(high, 8), l, second);
      }
      __m512i dot[2];
      sum_rows(sums, dot);  // lane r: row r's dot over block b (dot[0]) and b + 1 (dot[1])
      const std::size_t xb = static_cast<std::size_t>(i * num_blocks + b);
      if constexpr (kOffset != 0) {
        const auto taken = [&](std::size_t block) {
          return kOffset >= 128 ? 256 * kOffset * x.high_sums[block] : kOffset * qsums[block];
        };
        dot[0] = _mm512_sub_epi32(dot[0], _mm512_set1_epi32(taken(xb)));
        if (!single) dot[1] = _mm512_sub_epi32(dot[1], _mm512_set1_epi32(taken(xb + 1)));
      }
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[0]),
                               _mm512_mul_ps(d0, _mm512_set1_ps(scales[xb])), acc[i]);
      if constexpr (Block::kHasMin) {
        acc[i] = _mm512_fmadd_ps(min0, _mm512_set1_ps(scaled_sums[xb]), acc[i]);
      }
      if (single) continue;
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[1]),
                               _mm512_mul_ps(d1, _mm512_set1_ps(scales[xb + 1])), acc[i]);
      if constexpr (Block::kHasMin) {
        acc[i] = _mm512_fmadd_ps(min1, _mm512_set1_ps(scaled_sums[xb + 1]), acc[i]);
      }
    }
  };
  if constexpr (kGroup == 1) {
    for (std::int64_t b = 0; b < num_blocks; b += 2) {
      const bool single = b + 1 == num_blocks;
      const std::size_t g0 = static_cast<std::size_t>(b) * Block::kGroupBytes;
      const std::size_t g1 = single ? g0 : g0 + Block::kGroupBytes;
      // The next group's rows, the line of each block's start (a pair spans at most 2 lines
      // more than a line apart only for Q8_0's 68 bytes).
      if (!last) {
#pragma GCC unroll 16
        for (int r = 0; r < kInt16DirectGroup; ++r) {
          __builtin_prefetch(rows[r] + w_stride + g0, 0, 3);
          __builtin_prefetch(rows[r] + w_stride + g1 + Block::kGroupBytes - 1, 0, 3);
        }
      }
      one_block_scales<Block>(offsets, w + g0, block_scale[0], block_min[0]);
      if (!single) one_block_scales<Block>(offsets, w + g1, block_scale[1], block_min[1]);
      pair(b, g0, 0, 0, g1, single ? 0 : 1, single);
    }
  } else {
    for (std::int64_t g = 0; g < num_blocks / kGroup; ++g) {
      const std::size_t at = static_cast<std::size_t>(g) * Block::kGroupBytes;
      Block::scales8(w + at, offsets_low, block_scale[0], block_min[0], 16);
      Block::scales8(w + at, offsets_high, block_scale[0] + 8, block_min[0] + 8, 16);
      int16::for_each_block<kGroup / 2>([&](auto half) {
        constexpr int j = 2 * decltype(half)::value;
        // The next group's rows, a line per pair of blocks: the group's 144 bytes touch at most
        // 4 lines, the ones holding its bytes 0, 64, 128 and 143.
        if (!last) {
          constexpr int kByte = j == 0 ? 0 : j == 2 ? 64 : j == 4 ? 128 : Block::kGroupBytes - 1;
#pragma GCC unroll 16
          for (int r = 0; r < kInt16DirectGroup; ++r) {
            __builtin_prefetch(rows[r] + w_stride + at + kByte, 0, 3);
          }
        }
        pair(g * kGroup + j, at, j, j, at, j + 1, false);
      });
    }
  }
  store_lanes<kRows>(acc, count, lane_stride, y, ldy);
}

}  // namespace

void int16_tile(DType dtype, const std::int32_t* pairs, const float* scales,
                const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
                const std::uint8_t* next, std::int64_t next_rows, float* acc) {
  const Int16Pairs codes{.units = pairs, .scales = scales, .scaled_sums = scaled_sums};
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    if (vectors == 1) {
      const int16::RowMajorTile<Block, int16_tile_rows(1), Avx512Tiles> rows(w, w_stride, num_rows,
                                                                             next, next_rows);
      return tile_typed<Block, 1>(codes, k, rows, acc);
    }
    PAGODA_CHECK_EQ(vectors, 2) << "int16_tile takes up to " << kInt16PieceRows << " rows";
    const int16::RowMajorTile<Block, int16_tile_rows(2), Avx512Tiles> rows(w, w_stride, num_rows,
                                                                           next, next_rows);
    tile_typed<Block, 2>(codes, k, rows, acc);
  });
}

void int16_direct(DType dtype, const std::int16_t* q, const float* scales, const float* scaled_sums,
                  const std::int32_t* qsums, std::int64_t m, std::int64_t k, const std::uint8_t* w,
                  std::size_t w_stride, std::int64_t n_begin, std::int64_t n_end, float* y,
                  std::int64_t ldy) {
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    int16::check_whole_groups<Block, kInt16Block>(k);
    thread_local Int16XBytes split;
    const bool vnni = kVnniDirect<Block> && cpu_int16_direct_vnni();
    if (vnni) split_rows_int16(q, m, k, split);
    int16::with_row_count<kInt16DirectMaxRows>(m, [&](auto rows) {
      int16::for_each_lane_group<kInt16DirectGroup>(
          w, w_stride, n_begin, n_end,
          [&](const std::uint8_t* group, std::int64_t n, int count, std::int64_t lane_stride,
              bool last) {
            if constexpr (kVnniDirect<Block>) {
              if (vnni) {
                int16_direct_group_vnni<Block, decltype(rows)::value>(
                    split, scales, scaled_sums, qsums, k, group, w_stride, count, lane_stride, last,
                    y + n, ldy);
                return;
              }
            }
            int16_direct_group<Block, decltype(rows)::value>(
                q, scales, scaled_sums, k, group, w_stride, count, lane_stride, last, y + n, ldy);
          });
    });
  });
}

void int16_tile_interleaved(DType dtype, const std::int32_t* pairs, const float* scales,
                            const float* scaled_sums, std::int64_t vectors, std::int64_t k,
                            const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                            std::int64_t num_rows, float* acc) {
  const Int16Pairs codes{.units = pairs, .scales = scales, .scaled_sums = scaled_sums};
  with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    if constexpr (int16::kInterleaves<Block>) {
      int16::check_whole_groups<Block, kInt16Block>(k);
      const int16::PanelTile<Block, Avx512Tiles> rows(panels, row_bytes, n0, num_rows);
      if (vectors == 1) {
        return tile_typed<Block, 1>(codes, k, rows, acc);
      }
      PAGODA_CHECK_EQ(vectors, 2) << "int16_tile takes up to " << kInt16PieceRows << " rows";
      tile_typed<Block, 2>(codes, k, rows, acc);
    } else {
      PAGODA_CHECK(false) << "no interleaved layout of " << dtype_name(dtype);
    }
  });
}

}  // namespace pagoda::cpu::avx512
