// The AVX2 + FMA work item of paged_attention: one sequence, one KV head, a tile of consecutive
// query tokens with all the q heads of that KV head's group. Call only when cpu_has_avx2().
#pragma once

#include <cstdint>

namespace pagoda::cpu::avx2 {

/// Keys scored and folded into the online softmax at a time.
inline constexpr std::int64_t kKeyChunk = 16;
/// Most keys one gather_kv_rows call takes (the AVX-512 tile's key block).
inline constexpr std::int64_t kMaxGatherKeys = 128;

/// Plain data (no member functions: nothing inline may be compiled with AVX2 flags).
struct AttentionTile {
  const float* q;  ///< Token 0, head 0 of the group: row (t, g) at q + t*token_stride + g*D.
  float* out;      ///< Laid out as q.
  std::int64_t token_stride;        ///< num_heads * head_dim.
  std::int64_t num_queries;         ///< Tokens in the tile.
  std::int64_t first_position;      ///< Absolute position of token 0.
  std::int64_t group_size;          ///< q heads per KV head.
  std::int64_t head_dim;            ///< D, a multiple of 8.
  float scale;                      ///< Softmax scale, 1/sqrt(D).
  const float* k;                   ///< This KV head at slot 0: slot s at k + s*slot_stride.
  const float* v;                   ///< As k.
  std::int64_t slot_stride;         ///< num_kv_heads * head_dim.
  const std::int32_t* block_table;  ///< This sequence's blocks.
  std::int64_t block_size;
  float* scratch;  ///< attention_tile_scratch_floats(...) floats.
  // An fp16 cache instead of k and v (which are then null). The AVX2 tile has gather_kv_rows
  // widen the rows into kv_rows, once per key chunk; the AVX-512 tile widens in its loads.
  const std::uint16_t* k_f16;  ///< As k, or null for an fp32 cache.
  const std::uint16_t* v_f16;  ///< As k_f16.
  float* kv_rows;              ///< kv_rows_floats(head_dim) floats (AVX2 tile with k_f16).
};

/// Floats of AttentionTile::kv_rows: K then V rows of one gather, fp32.
constexpr std::int64_t kv_rows_floats(std::int64_t head_dim) {
  return 2 * kMaxGatherKeys * head_dim;
}

/// Floats of scratch attention_tile needs for `rows` = num_queries * group_size.
constexpr std::int64_t attention_tile_scratch_floats(std::int64_t rows, std::int64_t head_dim) {
  return rows * (head_dim + kKeyChunk + 2);
}

/// Computes the tile's outputs.
void attention_tile(const AttentionTile& tile);

// Shared by the AVX2 and AVX-512 tiles; defined in paged_attention.cc (baseline flags), so
// nothing here is compiled with wider instructions than the caller's CPU has.

/// Starts an online softmax over `rows` rows: acc [rows, head_dim] = 0, row_max = -inf,
/// row_sum = 0.
void reset_softmax_state(std::int64_t rows, std::int64_t head_dim, float* acc, float* row_max,
                         float* row_sum);

/// keys[j] and values[j]: the tile's K and V rows at key position key0 + j, for j < count
/// (<= kMaxGatherKeys), found through the block table; with an fp16 cache, fp32 copies in
/// tile.kv_rows.
void gather_kv_rows(const AttentionTile& tile, std::int64_t key0, std::int64_t count,
                    const float** keys, const float** values);

/// As above for an fp16 cache, without widening: the cache's own rows (the AVX-512 tile widens
/// them in its loads).
void gather_kv_rows(const AttentionTile& tile, std::int64_t key0, std::int64_t count,
                    const std::uint16_t** keys, const std::uint16_t** values);

/// dst[i] = src[i] as fp32 (exact) for i < n, n a multiple of 8. Defined in
/// paged_attention_avx2.cc (F16C).
void widen_fp16(const std::uint16_t* src, std::int64_t n, float* dst);

}  // namespace pagoda::cpu::avx2
