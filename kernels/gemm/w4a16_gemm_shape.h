// The W4A16 GEMM's geometry, shared by its kernel (w4a16_gemm.cu) and the host's launch plan
// (w4a16_gemm_plan.h): CTA and tile shapes, the weight forms, the bytes of a warp's ring stage
// and of the x buffers, and how many CTAs an SM is meant to hold.
#pragma once

#include <cuda_runtime_api.h>

#include "quant/w4a16_layout.h"

namespace pagoda::kernels::w4a16 {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = static_cast<int>(quant::kW4A16TileRows);
constexpr int kTileCols = static_cast<int>(quant::kW4A16TileCols);
constexpr int kTileVectors = 32;     // 16-byte vectors per tile: one per lane
constexpr int kStages = 8;           // tiles of a warp's ring of weights in shared memory
constexpr int kMinTilesPerWarp = 4;  // below this a K split costs more than it hides
// The weight forms: GPTQ / AWQ / Q4_0's zero points, or the GGUF form with 4-, 5-, 6- or 8-bit
// codes (quant/w4a16_layout.h).
enum class Form { kZeroPoint, kGguf4, kGguf5, kGguf6, kGguf8 };
// Code bits above the low nibble, in packed_hi.
__host__ __device__ constexpr int hi_bits_of(Form f) {
  return f == Form::kGguf5 ? 1 : f == Form::kGguf6 ? 2 : f == Form::kGguf8 ? 4 : 0;
}
// Group metadata travels in the ring beside its tile: per group the tile touches, one slot of
// the warp's 16 rows. A 64-column tile touches at most 2 groups of 32 or more columns and 4 of
// 16 (the GGUF form's Q6_K). A zero-point slot: 16 fp16 scales, then 16 zeros; a GGUF slot:
// 16 fp16 S, 16 fp16 B, 16 sc, 16 mc. Each slot is copied in 16-byte pieces, one lane each.
__host__ __device__ constexpr int group_slots(int group_size) {
  return group_size == 16 ? 4 : 2;
}
__host__ __device__ constexpr int slot_bytes(Form f) {
  return f == Form::kZeroPoint ? 48 : 96;
}
__host__ __device__ constexpr int tile_stage_bytes(Form f) {
  return kTileVectors * (16 + 4 * hi_bits_of(f));
}
// Bytes of one stage of a warp's ring: the tile's 32 16-byte vectors, each lane's high bits,
// then the group slots.
__host__ __device__ constexpr int stage_bytes(Form f, int group_size) {
  return tile_stage_bytes(f) + group_slots(group_size) * slot_bytes(f);
}
// CTAs an SM holds at once, by x tiles per CTA: the launch bounds cap the registers to fit them
// (what hides the weights' latency is warps in flight). The GGUF form holds more per thread (the
// min terms, x's group sums, the high bits), so fewer.
__host__ __device__ constexpr int min_ctas_per_sm(int m_tiles, Form f) {
  if (f != Form::kZeroPoint) return m_tiles == 1 ? 5 : m_tiles == 2 ? 3 : 2;
  return m_tiles == 1 ? 7 : m_tiles == 2 ? 4 : 3;
}
constexpr int kSmemPerSm = 227 << 10;

// x's rows of a CTA live in shared memory for its whole K range, each row padded by 16 bytes so
// the 8 rows of an A fragment fall in different banks.
constexpr int kXPad = 8;  // elements
// Buffers of x chunks: two (the next chunk copied during this one) past 16 rows.
__host__ __device__ constexpr int x_buffers(int m_tiles) {
  return m_tiles >= 2 ? 2 : 1;
}
// A buffer of x stays within this: one of 32 KB up to 16 rows (with the 19 KB zero-point ring, 4
// CTAs of 16 rows fit an SM), two of 24 KB past them (3 CTAs of 64 rows, 2 tiles per chunk).
__host__ __device__ constexpr int x_buffer_bytes(int m_tiles) {
  return x_buffers(m_tiles) == 2 ? 24 << 10 : 32 << 10;
}
// 19 KB, up to 44 KB with the high bits and 16-column groups.
__host__ __device__ constexpr int ring_bytes(Form f, int group_size) {
  return kWarps * kStages * stage_bytes(f, group_size);
}

}  // namespace pagoda::kernels::w4a16
