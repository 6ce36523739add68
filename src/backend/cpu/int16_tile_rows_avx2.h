// The AVX2 Isa policy of the int16 tile's weight rows (int16_tile_rows.h). AVX2 intrinsics,
// internal linkage: include only from matmul_int16_avx2.cc.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/interleaved_rows.h"
#include "common/check.h"

namespace pagoda::cpu::avx2 {
namespace {

struct Avx2Tiles {
  static constexpr int kCodeBytes = 2;
  static void store_codes(std::int32_t* quants, __m256i codes) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(quants),
                       _mm256_cvtepi8_epi16(_mm256_castsi256_si128(codes)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(quants + 8),
                       _mm256_cvtepi8_epi16(_mm256_extracti128_si256(codes, 1)));
  }

  // The tile's rows, lanes lane .. lane + num_rows - 1 of one panel (AVX2 has no masked loads
  // narrower than 32 bits, so the caller keeps tiles inside panels). Each field is read as the 8
  // lanes from min(lane, 8): whole inside its 64-, 32- or 16-byte run. A tile from lane 9 on
  // then finds its rows `shift` lanes up, and one permute moves them down to lanes 0-7.
  class Window {
   public:
    Window(std::size_t /*panel_bytes*/, int lane, std::int64_t num_rows)
        : first_(std::min(lane, 8)), shift_(lane - first_) {
      PAGODA_CHECK(num_rows >= 1 && lane + num_rows <= kInterleavedRows)
          << "an AVX2 tile of " << num_rows << " rows from lane " << lane << " leaves its panel";
      moves_ = _mm256_min_epi32(
          _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(shift_)),
          _mm256_set1_epi32(7));
    }
    __m256i words(const std::uint8_t* at) const {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 4 * first_));
      return shift_ == 0 ? v : _mm256_permutevar8x32_epi32(v, moves_);
    }
    __m256 halves(const std::uint8_t* at) const {
      const __m256 v =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 2 * first_)));
      return shift_ == 0 ? v : _mm256_permutevar8x32_ps(v, moves_);
    }
    __m256i signed_bytes(const std::uint8_t* at) const {
      const __m256i v =
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at + first_)));
      return shift_ == 0 ? v : _mm256_permutevar8x32_epi32(v, moves_);
    }

   private:
    int first_;      // the first lane loaded
    int shift_;      // row n0's lane minus first_
    __m256i moves_;  // lane i <- lane i + shift_
  };
};

}  // namespace
}  // namespace pagoda::cpu::avx2
