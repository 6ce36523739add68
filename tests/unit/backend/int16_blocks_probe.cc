#include "int16_blocks_probe.h"

#include <immintrin.h>

#include "backend/cpu/int16_blocks.h"

namespace pagoda::cpu::testing {

int decode_int16_blocks(DType dtype, const std::uint8_t* w, std::size_t w_stride, std::int64_t b,
                        std::int8_t q[8][32], float scale[8][2], float min[8][2]) {
  return int16::with_int16_block(dtype, [&](auto block) {
    using Block = decltype(block);
    constexpr int kS = Block::kSubBlocks;
    const std::size_t at = static_cast<std::size_t>(b / Block::kGroupBlocks) * Block::kGroupBytes;
    const int j = static_cast<int>(b % Block::kGroupBlocks);
    alignas(32) std::int32_t offsets[8];
    for (int l = 0; l < 8; ++l) offsets[l] = static_cast<std::int32_t>(l * w_stride + at);
    float scales[Block::kGroupBlocks * kS][8] = {};
    float mins[Block::kGroupBlocks * kS][8] = {};
    Block::scales8(w, _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets)), scales[0],
                   mins[0], 8);
    for (int l = 0; l < 8; ++l) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q[l]), Block::quants(w + offsets[l], j));
      for (int t = 0; t < 2; ++t) {
        scale[l][t] = t < kS ? scales[j * kS + t][l] : 0.0f;
        min[l][t] = t < kS && Block::kHasMin ? mins[j * kS + t][l] : 0.0f;
      }
    }
    return kS;
  });
}

}  // namespace pagoda::cpu::testing
