// The int16 tile's weight rows (matmul_int16_avx512.cc's int16_tile_typed), one addressing
// policy per layout: row-major GGUF rows and interleaved panels (interleaved_rows.h). AVX-512
// intrinsics, internal linkage: include only from that file (compiled with AVX-512 flags), as
// int16_blocks.h. The including file's AVX-512VL target pragma covers it.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_rows.h"
#include "model/dtype.h"

namespace pagoda::cpu::avx512 {
namespace {

inline float load_half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);
}

// int16_tile_typed's weight rows, one policy per layout. Each decodes the next block's quants
// into the tile's buffer in kDecodeSteps steps, spread over the current block's pairs, with row
// r's pair p (columns 2p, 2p + 1 as int16) at pair_index(r, p), and gives a group's scales of the
// tile's 8 rows as int16_blocks.h's scales8 computes them:
//
//   decode(step, g, j, quants, scale, min)  step `step` of block j of group g: quants [8 * 16]
//                                            (and a one-block group's scale, min [8])
//   scales8(g, scale, min)                   a K-quant group's, [kGroupBlocks * kSubBlocks][8]
//   prefetch_next(b)                         while block b is multiplied
//
// Rows past num_rows hold zeros or another row's finite values: their sums are dropped by the
// caller.

// Row-major GGUF rows, row r at w + r * w_stride. Step r decodes row r; the next tile's rows are
// prefetched a block's bytes at a time.
template <typename Block, int kRows>
class RowMajorTile {
 public:
  static constexpr int kDecodeSteps = kRows;
  static constexpr int pair_index(int r, int p) { return r * kInt16Block / 2 + p; }

  RowMajorTile(const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows)
      : w_(w), w_stride_(w_stride), num_rows_(num_rows), next_(next), next_rows_(next_rows) {
    alignas(32) std::int32_t offsets[8];
    for (int r = 0; r < 8; ++r) {
      offsets[r] = static_cast<std::int32_t>(std::min<std::int64_t>(r, num_rows - 1) * w_stride);
    }
    row_offsets_ = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
  }
  void decode(int r, std::int64_t g, int j, std::int32_t* quants, float* scale, float* min) const {
    if (r >= num_rows_) return;
    const std::uint8_t* group =
        w_ + r * w_stride_ + static_cast<std::size_t>(g) * Block::kGroupBytes;
    // A branch per block index, so each decode has constant shifts: the pattern repeats every
    // kGroupBlocks blocks and predicts well.
    __m256i q = _mm256_setzero_si256();
    int16::for_each_block<Block::kGroupBlocks>([&](auto j_constant) {
      if (j == j_constant) q = Block::quants(group, j_constant);
    });
    _mm512_store_si512(quants + pair_index(r, 0), _mm512_cvtepi8_epi16(q));
    if constexpr (Block::kGroupBlocks == 1) {
      // fp16 scale first, then the fp16 min: int16_blocks.h's one-block layouts.
      scale[r] = load_half(group);
      if constexpr (Block::kHasMin) min[r] = load_half(group + 2);
    }
  }
  void scales8(std::int64_t g, float* scale, float* min) const {
    Block::scales8(w_ + static_cast<std::size_t>(g) * Block::kGroupBytes, row_offsets_, scale, min,
                   8);
  }
  void prefetch_next(std::int64_t b) const {
    if (next_ == nullptr) return;
    const std::size_t at = static_cast<std::size_t>(b) * Block::kGroupBytes / Block::kGroupBlocks;
    for (std::int64_t r = 0; r < next_rows_; ++r) {
      __builtin_prefetch(next_ + r * w_stride_ + at, /*rw=*/0, /*locality=*/3);
    }
  }

 private:
  const std::uint8_t* w_;
  std::size_t w_stride_;
  std::int64_t num_rows_;
  const std::uint8_t* next_;
  std::int64_t next_rows_;
  __m256i row_offsets_;  // row r's bytes from row 0's (rows past num_rows: the last row's)
};

// The types InterleavedTile reads: interleave_segments()'s.
template <typename Block>
constexpr bool kInterleaves =
    Block::kType == DType::kQ8_0 || Block::kType == DType::kQ4_0 || Block::kType == DType::kQ4_1 ||
    Block::kType == DType::kQ4_K || Block::kType == DType::kQ5_K || Block::kType == DType::kQ6_K;

// An interleaved matrix (interleaved_rows.h): row n0 + r in panel (n0 + r) / 16 at lane
// (n0 + r) % 16. A panel's group holds each segment's unit i of its 16 rows side by side (units
// of u bytes, row lane l's at s + (i * 16 + l) * u), so one load takes a field of the tile's 8
// rows, one row per lane, where the row-major layout needs a gather or a load per row:
//
//   Q8_0, Q4_0  d 0 | qs 32                 Q4_K  d 0 | dmin 32 | scales 64 | qs 256
//   Q4_1        d 0 | m 32 | qs 64           Q5_K  d 0 | dmin 32 | scales 64 | qh 256 | qs 768
//                                           Q6_K  d 0 | scales 32 | half h (h = 0, 1) at 1536 h:
//                                                   ql 288 (two runs of 512) | qh 1312
//
// Step i decodes code unit i of the block for all 8 rows, with the row-major decoders' shifts and
// masks on the same bytes: 4 columns per row, which sign-extended are its pairs 2i and 2i + 1, so
// the buffer holds row r's pair p at (p / 2) * 16 + 2r + p % 2 (Q4_0/Q4_1: a unit's low nibbles
// are pairs 2i and 2i + 1, its high nibbles pairs 8 + 2i and 9 + 2i, so 4 steps). Where the 8
// lanes run past the panel (6-row tiles from lane 11 on) two masked loads take them from row 0's
// panel and the next.
template <typename Block>
class InterleavedTile {
  static_assert(kInterleaves<Block>);
  static constexpr bool kNibbles = Block::kType == DType::kQ4_0 || Block::kType == DType::kQ4_1;

 public:
  static constexpr int kDecodeSteps = kNibbles ? 4 : 8;
  static constexpr int pair_index(int r, int p) { return p / 2 * 16 + 2 * r + p % 2; }

  InterleavedTile(const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
                  std::int64_t num_rows)
      : panel_bytes_(row_bytes * kInterleavedRows),
        panel_(panels + static_cast<std::size_t>(n0 / kInterleavedRows) * panel_bytes_),
        lane_(static_cast<int>(n0 % kInterleavedRows)) {
    const int in_panel = static_cast<int>(kInterleavedRows) - lane_;
    one_panel_ = in_panel >= 8;
    mask_a_ = static_cast<__mmask8>(one_panel_ ? 0xFF : (1u << in_panel) - 1);
    mask_b_ = static_cast<__mmask8>(num_rows > in_panel ? 0xFF & ~mask_a_ : 0);
  }
  // Inlined whole: an out-of-line block-index dispatch in the pair loop spills its accumulators
  // (2.6x slower, Q4_K).
  [[gnu::always_inline, gnu::flatten]] void decode(int step, std::int64_t g, int j,
                                                   std::int32_t* quants, float* scale,
                                                   float* min) const {
    const std::uint8_t* group = group_at(g);
    if constexpr (Block::kGroupBlocks == 1) {
      if (step == 0) {
        _mm256_store_ps(scale, halves(group));
        if constexpr (Block::kHasMin) _mm256_store_ps(min, halves(group + 32));
      }
    }
    const std::uint8_t* unit = group + 64 * step;
    const auto store = [&](int slot, __m256i codes) {
      _mm512_store_si512(quants + 16 * slot, _mm512_cvtepi8_epi16(codes));
    };
    if constexpr (Block::kType == DType::kQ8_0) {
      store(step, words(unit + 32));
    } else if constexpr (kNibbles) {
      const __m256i codes = words(unit + (Block::kHasMin ? 64 : 32));
      const __m256i offset = _mm256_set1_epi8(Block::kHasMin ? 0 : 8);  // Q4_0: nibble - 8
      store(step, _mm256_sub_epi8(int16::byte_field(codes, 0, 0x0F), offset));
      store(4 + step, _mm256_sub_epi8(int16::byte_field(codes, 4, 0x0F), offset));
    } else {
      int16::for_each_block<8>([&](auto j_constant) {
        if (j == j_constant) store(step, k_codes<decltype(j_constant)::value>(unit));
      });
    }
  }
  void scales8(std::int64_t g, float* scale, float* min) const {
    const std::uint8_t* group = group_at(g);
    if constexpr (Block::kType == DType::kQ4_K || Block::kType == DType::kQ5_K) {
      // k_scales8's arithmetic on the same fields.
      const __m256 d = halves(group);
      const __m256 dmin = halves(group + 32);
      const __m256i s0 = words(group + 64);   // s[0..3]
      const __m256i s1 = words(group + 128);  // s[4..7]
      const __m256i s2 = words(group + 192);  // s[8..11]
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        _mm256_storeu_ps(scale + j * 8, int16::times(d, int16::lane_bits(s0, 8 * j, 63)));
        _mm256_storeu_ps(min + j * 8, int16::minus_times(dmin, int16::lane_bits(s1, 8 * j, 63)));
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i sc =
            _mm256_or_si256(int16::lane_bits(s2, 8 * j, 15), int16::lane_bits(s0, 8 * j + 2, 0x30));
        const __m256i m = _mm256_or_si256(int16::lane_bits(s2, 8 * j + 4, 15),
                                          int16::lane_bits(s1, 8 * j + 2, 0x30));
        _mm256_storeu_ps(scale + (4 + j) * 8, int16::times(d, sc));
        _mm256_storeu_ps(min + (4 + j) * 8, int16::minus_times(dmin, m));
      }
    } else if constexpr (Block::kType == DType::kQ6_K) {
      // Q6_KInt16::scales8's: scale_t of block j = d * (int8) scales[2 j + t].
      const __m256 d = halves(group);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        _mm256_storeu_ps(scale + i * 8, int16::times(d, signed_bytes(group + 32 + 16 * i)));
      }
    }
  }
  // The next panel's bytes of block b, which the tiles that start there read from their first
  // block on (the hardware prefetcher alone: Q8_0 8192x2048 prefill 43% slower than row-major
  // rows, which prefetch the next tile's). Past the last panel this names memory that may not be
  // mapped: a prefetch does not fault.
  void prefetch_next(std::int64_t b) const {
    constexpr std::size_t kBlockBytes = kInterleavedRows * Block::kGroupBytes / Block::kGroupBlocks;
    const std::uintptr_t next = reinterpret_cast<std::uintptr_t>(panel_) + panel_bytes_ +
                                static_cast<std::size_t>(b) * kBlockBytes;
#pragma GCC unroll 16
    for (std::size_t at = 0; at < kBlockBytes; at += 64) {
      __builtin_prefetch(reinterpret_cast<const void*>(next + at), /*rw=*/0, /*locality=*/3);
    }
  }

 private:
  const std::uint8_t* group_at(std::int64_t g) const {
    return panel_ + static_cast<std::size_t>(g) * kInterleavedRows * Block::kGroupBytes;
  }
  // Q4_K's and Q6_K's code unit (`unit`: the group plus 64 times its index) of block kJ, as
  // Q4_KInt16::quants and Q6_KInt16::quants decode them.
  template <int kJ>
  __m256i k_codes(const std::uint8_t* unit) const {
    if constexpr (Block::kType == DType::kQ4_K) {
      return int16::byte_field(words(unit + 256 + 512 * (kJ / 2)), 4 * (kJ % 2), 0x0F);
    } else if constexpr (Block::kType == DType::kQ5_K) {  // qh at 256, qs at 768
      const __m256i low = int16::byte_field(words(unit + 768 + 512 * (kJ / 2)), 4 * (kJ % 2), 0x0F);
      return _mm256_or_si256(low, int16::byte_field_at(words(unit + 256), kJ, 4, 1));
    } else {
      const std::uint8_t* half = unit + 1536 * (kJ / 4);
      const __m256i low =
          int16::byte_field(words(half + 288 + 512 * (kJ % 2)), 4 * ((kJ % 4) / 2), 0x0F);
      const __m256i high = int16::byte_field_at(words(half + 1312), 2 * (kJ % 4), 4, 3);
      return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
    }
  }
  // The tile's 8 rows' fields of a segment unit whose lane 0 is at `at` in row 0's panel: 4-byte
  // words, fp16 values as fp32, int8 values as int32.
  __m256i words(const std::uint8_t* at) const {
    const std::uint8_t* first = at + 4 * lane_;
    if (one_panel_) return int16::load_256(first);
    const __m256i v = _mm256_maskz_loadu_epi32(mask_a_, first);
    if (mask_b_ == 0) return v;
    return _mm256_mask_loadu_epi32(v, mask_b_, first + panel_bytes_ - 4 * kInterleavedRows);
  }
  __m256 halves(const std::uint8_t* at) const {
    const std::uint8_t* first = at + 2 * lane_;
    __m128i v;
    if (one_panel_) {
      v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first));
    } else {
      v = _mm_maskz_loadu_epi16(mask_a_, first);
      if (mask_b_ != 0) {
        v = _mm_mask_loadu_epi16(v, mask_b_, first + panel_bytes_ - 2 * kInterleavedRows);
      }
    }
    return _mm256_cvtph_ps(v);
  }
  __m256i signed_bytes(const std::uint8_t* at) const {
    const std::uint8_t* first = at + lane_;
    __m128i v;
    if (one_panel_) {
      v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(first));
    } else {
      v = _mm_maskz_loadu_epi8(mask_a_, first);
      if (mask_b_ != 0) {
        v = _mm_mask_loadu_epi8(v, mask_b_, first + panel_bytes_ - kInterleavedRows);
      }
    }
    return _mm256_cvtepi8_epi32(v);
  }

  std::size_t panel_bytes_;
  const std::uint8_t* panel_;  // row n0's panel
  int lane_;                   // row n0's lane
  bool one_panel_;             // the 8 lanes lane_ .. lane_ + 7 lie in panel_
  __mmask8 mask_a_;            // else the lanes in panel_
  __mmask8 mask_b_;            // and those of the tile's rows in the next panel
};

}  // namespace
}  // namespace pagoda::cpu::avx512
