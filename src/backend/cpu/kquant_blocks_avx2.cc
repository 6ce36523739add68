#include "backend/cpu/kquant_blocks_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "backend/cpu/int16_blocks.h"
#include "common/check.h"

namespace pagoda::cpu::kquant_avx2 {
namespace {

// f(std::integral_constant<int, j>{}) for j < kCount: constant block indices make the decoders'
// shifts immediates.
template <int kCount, typename F>
inline void for_each_block(F&& f) {
  [&]<int... kJ>(std::integer_sequence<int, kJ...>) {
    (f(std::integral_constant<int, kJ>{}), ...);
  }
  (std::make_integer_sequence<int, kCount>{});
}

// Eight signed bytes to fp32 times `scale` (+ `min`): the reference's two roundings (this file is
// built without FP contraction).
template <bool kHasMin>
inline void store_weights(__m128i bytes, float scale, float min, float* dst) {
  __m256 v = _mm256_mul_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)));
  if constexpr (kHasMin) v = _mm256_add_ps(v, _mm256_set1_ps(min));
  _mm256_storeu_ps(dst, v);
}

// Eight groups (stored blocks) per scales8 call; past the last group the lanes repeat it.
template <typename Block>
void decode_typed(const std::uint8_t* src, std::int64_t count, float* dst) {
  constexpr int kSub = Block::kSubBlocks;
  constexpr int kGroup = Block::kGroupBlocks;
  constexpr int kGroupWeights = 32 * kGroup;
  const std::int64_t num_groups = count / kGroupWeights;
  for (std::int64_t g0 = 0; g0 < num_groups; g0 += 8) {
    const std::int64_t groups = std::min<std::int64_t>(8, num_groups - g0);
    const std::uint8_t* base = src + static_cast<std::size_t>(g0) * Block::kGroupBytes;
    alignas(32) std::int32_t offsets[8];
    for (int l = 0; l < 8; ++l) {
      offsets[l] =
          static_cast<std::int32_t>(std::min<std::int64_t>(l, groups - 1)) * Block::kGroupBytes;
    }
    alignas(32) float scale[kGroup * kSub][8];
    alignas(32) float min[kGroup * kSub][8] = {};
    Block::scales8(base, _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets)), scale[0],
                   min[0], 8);
    for (std::int64_t l = 0; l < groups; ++l) {
      const std::uint8_t* group = base + offsets[l];
      float* out = dst + (g0 + l) * kGroupWeights;
      for_each_block<kGroup>([&](auto j) {
        const __m256i q = Block::quants(group, j);
        const __m128i low = _mm256_castsi256_si128(q);
        const __m128i high = _mm256_extracti128_si256(q, 1);
        const __m128i eights[4] = {low, _mm_srli_si128(low, 8), high, _mm_srli_si128(high, 8)};
#pragma GCC unroll 4
        for (int e = 0; e < 4; ++e) {
          // Columns 8e .. 8e + 7 lie in sub-block e / 2 of two, or the only one.
          const int t = kSub == 2 ? e / 2 : 0;
          store_weights<Block::kHasMin>(eights[e], scale[j * kSub + t][l], min[j * kSub + t][l],
                                        out + 32 * j + 8 * e);
        }
      });
    }
  }
}

}  // namespace

void decode(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst) {
  PAGODA_CHECK(decodes(dtype)) << dtype_name(dtype);
  int16::with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    PAGODA_CHECK_EQ(count % (32 * Block::kGroupBlocks), 0) << dtype_name(dtype);
    decode_typed<Block>(src, count, dst);
  });
}

}  // namespace pagoda::cpu::kquant_avx2
