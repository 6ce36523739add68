// The AVX-512 Isa policy of the int16 tile's weight rows (int16_tile_rows.h). AVX-512 intrinsics,
// internal linkage: include only from matmul_int16_avx512.cc, whose AVX-512VL target pragma
// covers it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/interleaved_rows.h"

namespace pagoda::cpu::avx512 {
namespace {

struct Avx512Tiles {
  static constexpr int kCodeBytes = 2;
  static void store_codes(std::int32_t* quants, __m256i codes) {
    _mm512_store_si512(quants, _mm512_cvtepi8_epi16(codes));
  }

  // The tile's 8 rows from lane `lane` of row n0's panel. Where they run past the panel (6-row
  // tiles from lane 11 on) two masked loads take them from that panel and the next.
  class Window {
   public:
    Window(std::size_t panel_bytes, int lane, std::int64_t num_rows)
        : panel_bytes_(panel_bytes), lane_(lane) {
      const int in_panel = static_cast<int>(kInterleavedRows) - lane;
      one_panel_ = in_panel >= 8;
      mask_a_ = static_cast<__mmask8>(one_panel_ ? 0xFF : (1u << in_panel) - 1);
      mask_b_ = static_cast<__mmask8>(num_rows > in_panel ? 0xFF & ~mask_a_ : 0);
    }
    __m256i words(const std::uint8_t* at) const {
      const std::uint8_t* first = at + 4 * lane_;
      if (one_panel_) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first));
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

   private:
    std::size_t panel_bytes_;
    int lane_;         // row n0's lane
    bool one_panel_;   // the 8 lanes lane_ .. lane_ + 7 lie in row n0's panel
    __mmask8 mask_a_;  // else the lanes in that panel
    __mmask8 mask_b_;  // and those of the tile's rows in the next panel
  };
};

// The int8 tile's (matmul_int8_avx512.h): codes stay bytes, offset by 128 (c ^ 0x80 = c + 128 for
// a signed byte c) so that vpdpbusd can take them as its unsigned operand.
struct Avx512ByteTiles : Avx512Tiles {
  static constexpr int kCodeBytes = 1;
  static void store_codes(std::int32_t* quants, __m256i codes) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(quants),
                       _mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
};

}  // namespace
}  // namespace pagoda::cpu::avx512
