// The AVX-512 work item of paged_attention (same tile as avx2::attention_tile, same results up
// to rounding): scores for 16 keys land in one zmm, so the online softmax runs 16 lanes wide and
// no score needs a horizontal sum of its own. Each query row's arithmetic depends only on that
// row, so a token gets the same bits alone (decode) as inside a prefill tile. Call only when
// cpu_has_avx512() and head_dim is a multiple of 16, at most kMaxHeadDim.
#pragma once

#include <cstdint>

#include "backend/cpu/paged_attention_avx2.h"

namespace pagoda::cpu::avx512 {

/// Largest head_dim attention_tile takes.
inline constexpr std::int64_t kMaxHeadDim = 256;
/// Keys whose scores are computed before the softmax state is updated (one rescale per block).
inline constexpr std::int64_t kKeyBlock = 128;
/// Query heads of one token processed together, sharing each K/V load.
inline constexpr std::int64_t kHeadsPerPass = 4;

/// Floats of scratch attention_tile needs for `rows` = num_queries * group_size.
constexpr std::int64_t attention_tile_scratch_floats(std::int64_t rows, std::int64_t head_dim) {
  return rows * (head_dim + 2) + kHeadsPerPass * kKeyBlock;
}

/// Computes the tile's outputs; tile.head_dim must be a multiple of 16 (<= kMaxHeadDim) and
/// tile.scratch must hold attention_tile_scratch_floats(num_queries * group_size, head_dim).
void attention_tile(const avx2::AttentionTile& tile);

}  // namespace pagoda::cpu::avx512
