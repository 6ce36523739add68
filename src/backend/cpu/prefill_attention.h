// The prefill work item of paged_attention: one sequence, one KV head, a tile of query rows
// (tokens x the group's q heads) computed as two small matrix products per block of keys, with
// the rows in the vector lanes:
//
//   rows r = t * group_size + g over the sequence's q_len tokens and the KV head's group:
//     tile = rows [first_row, first_row + num_rows), num_rows <= kRows of the ISA
//
//   per block of kKeyBlock keys at absolute positions [key0, key0 + kKeyBlock):
//     S^T [keys, rows] = K [keys, D] . Q^T [D, rows]   (one K element broadcast, x all rows)
//     online softmax down each lane (max, exp, sum: no horizontal reductions)
//     O^T [D, rows]   += V^T [D, keys] . P^T [keys, rows]
//
// Each K/V element is loaded once per tile and multiplies a whole vector of rows, so the loops
// are register-blocked FMAs like a matmul's, where the decode tile (paged_attention_avx2.h) runs
// one dot product per (row, key) and reduces it across lanes. Each lane's arithmetic depends only
// on its row's position (blocks start at multiples of kKeyBlock, sums run in key order), so a row
// gets the same bits in any tile of this kernel, whatever prefill chunk it comes in.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// Plain data (no member functions: nothing inline may be compiled with wider ISA flags).
struct PrefillTile {
  const float* q;                   ///< Token 0 of the sequence, head 0 of the group: row (t, g) at
                                    ///< q + t*token_stride + g*head_dim.
  float* out;                       ///< Laid out as q.
  std::int64_t token_stride;        ///< num_heads * head_dim.
  std::int64_t group_size;          ///< q heads per KV head.
  std::int64_t head_dim;            ///< D, a multiple of 8, at most kPrefillMaxHeadDim.
  std::int64_t first_row;           ///< First row of the tile, t * group_size + g.
  std::int64_t num_rows;            ///< Rows in the tile, 1 .. the ISA's kRows.
  std::int64_t first_position;      ///< Absolute position of token 0 (seq_len - q_len).
  float scale;                      ///< Softmax scale, 1/sqrt(D).
  const float* k;                   ///< This KV head at slot 0: slot s at k + s*slot_stride.
  const float* v;                   ///< As k.
  const std::uint16_t* k_f16;       ///< As k for an fp16 cache (k and v are then null).
  const std::uint16_t* v_f16;       ///< As k_f16.
  std::int64_t slot_stride;         ///< num_kv_heads * head_dim.
  const std::int32_t* block_table;  ///< This sequence's blocks.
  std::int64_t block_size;
  float* scratch;  ///< prefill_tile_scratch_floats(head_dim) floats of the ISA.
};

/// Largest head_dim the prefill tiles take.
inline constexpr std::int64_t kPrefillMaxHeadDim = 256;

namespace avx2 {

/// Rows per tile: three 8-lane vectors.
inline constexpr std::int64_t kPrefillRows = 24;

/// Floats of PrefillTile::scratch for this ISA's tile.
std::int64_t prefill_tile_scratch_floats(std::int64_t head_dim);

/// Computes the tile's rows of out. Call only when cpu_has_avx2().
void prefill_tile(const PrefillTile& tile);

}  // namespace avx2

namespace avx512 {

/// Rows per tile: three 16-lane vectors.
inline constexpr std::int64_t kPrefillRows = 48;

/// Floats of PrefillTile::scratch for this ISA's tile.
std::int64_t prefill_tile_scratch_floats(std::int64_t head_dim);

/// Computes the tile's rows of out. Call only when cpu_has_avx512().
void prefill_tile(const PrefillTile& tile);

}  // namespace avx512

}  // namespace pagoda::cpu
