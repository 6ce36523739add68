// The tiles' weight rows (tile_typed in int16_tile_avx512.h, int16_tile_typed in
// matmul_int16_avx2_kernels.inc, int8_tile_typed in matmul_int8_avx2.cc), one addressing policy
// per layout: row-major GGUF rows and
// interleaved panels (interleaved_rows.h). Written once for both ISAs: an `Isa` policy supplies
// what differs (int16_tile_rows_avx512.h, int16_tile_rows_avx2.h):
//
//   Isa::kCodeBytes                  bytes a stored code takes: 2 (int16, vpdpwssd's pairs)
//                                    or 1 (bytes, the int8 tile's vpdpbusd quads)
//   Isa::store_codes(quants, codes)  32 signed bytes as 32 codes at quants (aligned): int16, or
//                                    bytes offset by 128 (unsigned, matmul_int8_avx512.h)
//   Isa::Window                      the loads of a tile's 8 rows' fields from their panel
//                                    (PanelTile, below)
//
// A unit is the int32 a tile broadcasts: a pair of int16 codes (2 columns) or a quad of bytes (4).
//
// AVX2, FMA and F16C intrinsics, internal linkage: include only from translation units compiled
// with at least those flags, as int16_blocks.h.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/int16_blocks.h"
#include "backend/cpu/int16_kernel_loops.h"
#include "backend/cpu/interleaved_rows.h"
#include "model/dtype.h"

namespace pagoda::cpu::int16 {
namespace {

// Each policy decodes a block's quants into the tile's buffer in kDecodeSteps steps (the AVX-512
// tile spreads them over the previous block's units, the AVX2 tile runs them before its pairs),
// with row r's unit u at unit_index(r, u), and gives a group's
// scales of the tile's rows as int16_blocks.h's scales8 computes them, row r's at [r] of rows of
// kScaleRows floats:
//
//   decode(step, g, j, quants, scale, min)  step `step` of block j of group g: quants
//                                            [kQuantInts] (and a one-block group's scale, min)
//   scales8(g, scale, min)                   a K-quant group's, [kGroupBlocks * kSubBlocks]
//                                            [kScaleRows]; nothing for one-block groups
//   prefetch_next(b)                         while block b is multiplied
//
// Rows past num_rows hold zeros or another row's finite values: their sums are dropped by the
// caller.

// Row-major GGUF rows, row r at w + r * w_stride. Step r decodes row r; the next tile's rows are
// prefetched a block's bytes at a time.
template <typename Block, int kRows, typename Isa>
class RowMajorTile {
  static constexpr int kScaleCalls = (kRows + 7) / 8;  // scales8 decodes 8 rows' scales a call
  static constexpr int kUnits = kInt16BlockPairs * Isa::kCodeBytes / 2;  // a block's, per row

 public:
  static constexpr int kDecodeSteps = kRows;
  static constexpr int kScaleRows = 8 * kScaleCalls;
  static constexpr int kQuantInts = kRows * kUnits;
  static constexpr int unit_index(int r, int u) { return r * kUnits + u; }

  RowMajorTile(const std::uint8_t* w, std::size_t w_stride, std::int64_t num_rows,
               const std::uint8_t* next, std::int64_t next_rows)
      : w_(w), w_stride_(w_stride), num_rows_(num_rows), next_(next), next_rows_(next_rows) {
    alignas(32) std::int32_t offsets[kScaleRows];
    for (int r = 0; r < kScaleRows; ++r) {
      offsets[r] = static_cast<std::int32_t>(std::min<std::int64_t>(r, num_rows - 1) * w_stride);
    }
    for (int c = 0; c < kScaleCalls; ++c) {
      row_offsets_[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 8 * c));
    }
  }
  void decode(int r, std::int64_t g, int j, std::int32_t* quants, float* scale, float* min) const {
    if (r >= num_rows_) return;
    const std::uint8_t* group =
        w_ + r * w_stride_ + static_cast<std::size_t>(g) * Block::kGroupBytes;
    // A branch per block index, so each decode has constant shifts: the pattern repeats every
    // kGroupBlocks blocks and predicts well.
    __m256i q = _mm256_setzero_si256();
    for_each_block<Block::kGroupBlocks>([&](auto j_constant) {
      if (j == j_constant) q = Block::quants(group, j_constant);
    });
    Isa::store_codes(quants + unit_index(r, 0), q);
    if constexpr (Block::kGroupBlocks == 1) {
      // fp16 scale first, then the fp16 min: int16_blocks.h's one-block layouts.
      scale[r] = load_half(group);
      if constexpr (Block::kHasMin) min[r] = load_half(group + 2);
    }
  }
  void scales8(std::int64_t g, float* scale, float* min) const {
    if constexpr (Block::kGroupBlocks > 1) {
      for (int c = 0; c < kScaleCalls; ++c) {
        Block::scales8(w_ + static_cast<std::size_t>(g) * Block::kGroupBytes, row_offsets_[c],
                       scale + 8 * c, min + 8 * c, kScaleRows);
      }
    }
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
  __m256i row_offsets_[kScaleCalls];  // row r's bytes from row 0's (past num_rows: the last row's)
};

// The types PanelTile reads: interleave_segments()'s.
template <typename Block>
constexpr bool kInterleaves =
    Block::kType == DType::kQ8_0 || Block::kType == DType::kQ4_0 || Block::kType == DType::kQ4_1 ||
    Block::kType == DType::kQ5_0 || Block::kType == DType::kQ5_1 || Block::kType == DType::kQ4_K ||
    Block::kType == DType::kQ5_K || Block::kType == DType::kQ6_K;

// Up to 8 rows of an interleaved matrix (interleaved_rows.h): row n0 + r in panel (n0 + r) / 16
// at lane (n0 + r) % 16. A panel's group holds each segment's unit i of its 16 rows side by side
// (units of u bytes, row lane l's at s + (i * 16 + l) * u), so one load takes a field of the
// tile's 8 rows, one row per lane, where the row-major layout needs a gather or a load per row:
//
//   Q8_0, Q4_0  d 0 | qs 32                 Q4_K  d 0 | dmin 32 | scales 64 | qs 256
//   Q4_1        d 0 | m 32 | qs 64           Q5_K  d 0 | dmin 32 | scales 64 | qh 256 | qs 768
//   Q5_0        d 0 | qh 32 | qs 96          Q6_K  d 0 | scales 32 | half h (h = 0, 1) at 1536 h:
//   Q5_1        d 0 | m 32 | qh 64 | qs 128          ql 288 (two runs of 512) | qh 1312
//
// Step i decodes code word i of the block for all 8 rows, with the row-major decoders' shifts and
// masks on the same bytes: 4 columns per row, which are its pairs 2i and 2i + 1 as int16 or its
// quad i as bytes, so the buffer holds row r's unit u at (u / U) * 8 U + r U + u % U, U units per
// 4 columns (Q4_0/Q4_1: a word's low nibbles are columns 4i .. 4i + 3, its high nibbles
// 16 + 4i .., so 4 steps; Q5_0/Q5_1 add bit c of the row's qh word to column c).
//
// Isa::Window(panel_bytes, lane, num_rows) gives the fields of the tile's rows as lanes 0-7:
// words(at) (4-byte words), halves(at) (fp16 as fp32) and signed_bytes(at) (int8 as int32), `at`
// the field's lane 0 in row n0's panel.
template <typename Block, typename Isa>
class PanelTile {
  static_assert(kInterleaves<Block>);
  static constexpr bool kFifthBit = Block::kType == DType::kQ5_0 || Block::kType == DType::kQ5_1;
  static constexpr bool kNibbles =
      kFifthBit || Block::kType == DType::kQ4_0 || Block::kType == DType::kQ4_1;
  static constexpr int kUnitsPerWord = Isa::kCodeBytes;  // units per 4 columns
  static constexpr int kSlotInts = 8 * kUnitsPerWord;    // one word of the tile's 8 rows

 public:
  static constexpr int kDecodeSteps = kNibbles ? 4 : 8;
  static constexpr int kScaleRows = 8;
  static constexpr int kQuantInts = 8 * kSlotInts;
  static constexpr int unit_index(int r, int u) {
    return u / kUnitsPerWord * kSlotInts + r * kUnitsPerWord + u % kUnitsPerWord;
  }

  PanelTile(const std::uint8_t* panels, std::size_t row_bytes, std::int64_t n0,
            std::int64_t num_rows)
      : panel_bytes_(row_bytes * kInterleavedRows),
        panel_(panels + static_cast<std::size_t>(n0 / kInterleavedRows) * panel_bytes_),
        window_(panel_bytes_, static_cast<int>(n0 % kInterleavedRows), num_rows) {}
  // Inlined whole: an out-of-line block-index dispatch in the pair loop spills its accumulators
  // (AVX-512 tile 2.6x slower, Q4_K).
  [[gnu::always_inline, gnu::flatten]] void decode(int step, std::int64_t g, int j,
                                                   std::int32_t* quants, float* scale,
                                                   float* min) const {
    const std::uint8_t* group = group_at(g);
    if constexpr (Block::kGroupBlocks == 1) {
      if (step == 0) {
        _mm256_store_ps(scale, window_.halves(group));
        if constexpr (Block::kHasMin) _mm256_store_ps(min, window_.halves(group + 32));
      }
    }
    const std::uint8_t* unit = group + 64 * step;
    const auto store = [&](int slot, __m256i codes) {
      Isa::store_codes(quants + kSlotInts * slot, codes);
    };
    if constexpr (Block::kType == DType::kQ8_0) {
      store(step, window_.words(unit + 32));
    } else if constexpr (kNibbles) {
      const std::uint8_t* fifth = group + (Block::kHasMin ? 64 : 32);
      const __m256i codes = window_.words(fifth + (kFifthBit ? 64 : 0) + 64 * step);
      __m256i low = byte_field(codes, 0, 0x0F);
      __m256i high = byte_field(codes, 4, 0x0F);
      if constexpr (kFifthBit) {
        const __m256i qh = window_.words(fifth);
        low = _mm256_or_si256(low, fifth_bits(qh, 4 * step));
        high = _mm256_or_si256(high, fifth_bits(qh, 16 + 4 * step));
      }
      // Q4_0: nibble - 8, Q5_0: q5 - 16.
      const __m256i offset = _mm256_set1_epi8(Block::kHasMin ? 0 : kFifthBit ? 16 : 8);
      store(step, _mm256_sub_epi8(low, offset));
      store(4 + step, _mm256_sub_epi8(high, offset));
    } else {
      for_each_block<8>([&](auto j_constant) __attribute__((always_inline)) {
        if (j == j_constant) store(step, k_codes<decltype(j_constant)::value>(unit));
      });
    }
  }
  void scales8(std::int64_t g, float* scale, float* min) const {
    const std::uint8_t* group = group_at(g);
    if constexpr (Block::kType == DType::kQ4_K || Block::kType == DType::kQ5_K) {
      // k_scales8's arithmetic on the same fields.
      const __m256 d = window_.halves(group);
      const __m256 dmin = window_.halves(group + 32);
      const __m256i s0 = window_.words(group + 64);   // s[0..3]
      const __m256i s1 = window_.words(group + 128);  // s[4..7]
      const __m256i s2 = window_.words(group + 192);  // s[8..11]
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        _mm256_storeu_ps(scale + j * 8, times(d, lane_bits(s0, 8 * j, 63)));
        _mm256_storeu_ps(min + j * 8, minus_times(dmin, lane_bits(s1, 8 * j, 63)));
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i sc =
            _mm256_or_si256(lane_bits(s2, 8 * j, 15), lane_bits(s0, 8 * j + 2, 0x30));
        const __m256i m =
            _mm256_or_si256(lane_bits(s2, 8 * j + 4, 15), lane_bits(s1, 8 * j + 2, 0x30));
        _mm256_storeu_ps(scale + (4 + j) * 8, times(d, sc));
        _mm256_storeu_ps(min + (4 + j) * 8, minus_times(dmin, m));
      }
    } else if constexpr (Block::kType == DType::kQ6_K) {
      // Q6_KInt16::scales8's: scale_t of block j = d * (int8) scales[2 j + t].
      const __m256 d = window_.halves(group);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        _mm256_storeu_ps(scale + i * 8, times(d, window_.signed_bytes(group + 32 + 16 * i)));
      }
    }
  }
  // The next panel's bytes of block b, which the tiles that start there read from their first
  // block on (the hardware prefetcher alone: AVX-512 Q8_0 8192x2048 prefill 43% slower than
  // row-major rows, which prefetch the next tile's). Past the last panel this names memory that
  // may not be mapped: a prefetch does not fault.
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
  // Bits shift .. shift + 3 of each lane's qh word as bit 4 of its bytes 0 .. 3 (a multiply by
  // 1 + 2^7 + 2^14 + 2^21 puts bit i at bit 8i, no two terms on one bit).
  static __m256i fifth_bits(__m256i qh, int shift) {
    const __m256i nibble =
        _mm256_and_si256(_mm256_srl_epi32(qh, _mm_cvtsi32_si128(shift)), _mm256_set1_epi32(0xF));
    const __m256i spread = _mm256_mullo_epi32(nibble, _mm256_set1_epi32(0x00204081));
    return _mm256_slli_epi16(_mm256_and_si256(spread, _mm256_set1_epi32(0x01010101)), 4);
  }
  const std::uint8_t* group_at(std::int64_t g) const {
    return panel_ + static_cast<std::size_t>(g) * kInterleavedRows * Block::kGroupBytes;
  }
  // Q4_K's, Q5_K's and Q6_K's code unit (`unit`: the group plus 64 times its index) of block kJ,
  // as Q4_KInt16::quants, Q5_KInt16::quants and Q6_KInt16::quants decode them.
  template <int kJ>
  __m256i k_codes(const std::uint8_t* unit) const {
    if constexpr (Block::kType == DType::kQ4_K) {
      return byte_field(window_.words(unit + 256 + 512 * (kJ / 2)), 4 * (kJ % 2), 0x0F);
    } else if constexpr (Block::kType == DType::kQ5_K) {  // qh at 256, qs at 768
      const __m256i low =
          byte_field(window_.words(unit + 768 + 512 * (kJ / 2)), 4 * (kJ % 2), 0x0F);
      return _mm256_or_si256(low, byte_field_at(window_.words(unit + 256), kJ, 4, 1));
    } else {
      const std::uint8_t* half = unit + 1536 * (kJ / 4);
      const __m256i low =
          byte_field(window_.words(half + 288 + 512 * (kJ % 2)), 4 * ((kJ % 4) / 2), 0x0F);
      const __m256i high = byte_field_at(window_.words(half + 1312), 2 * (kJ % 4), 4, 3);
      return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
    }
  }

  std::size_t panel_bytes_;
  const std::uint8_t* panel_;  // row n0's panel
  typename Isa::Window window_;
};

}  // namespace
}  // namespace pagoda::cpu::int16
