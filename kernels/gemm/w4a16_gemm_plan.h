// The host's launch plan of the W4A16 GEMM (w4a16_gemm.cu): x tiles per CTA, K splits that fill
// one wave of the current device, the chunk of x a CTA stages, its shared memory, and the split-K
// workspace that needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemm/w4a16_gemm.h"
#include "kernels/gemm/w4a16_gemm_shape.h"

namespace pagoda::kernels::w4a16 {

struct Plan {
  Form form = Form::kZeroPoint;
  int group_size = 32;
  int m_tiles = 1;   // 16-row tiles of x per CTA: 1, 2 or 4
  int m_blocks = 1;  // CTAs along m
  int n_tiles = 0;   // 16-row weight tiles
  int k_tiles = 0;   // 64-column weight tiles
  int splits = 1;    // CTAs along K
  int tiles_per_split = 0;
  int x_rows = 0;       // rows of x a CTA stages (at most 16 * m_tiles)
  int most_chunk = 0;   // tiles of x that fit kXBufferBytes
  int chunk_tiles = 0;  // tiles per chunk of a CTA's K range
};

/// The plan of an m-row product with an n x k weight of `form` and `group_size`.
Plan plan_for(std::int64_t m, std::int64_t n, std::int64_t k, Form form, std::int64_t group_size);
/// Set `splits` (as many as make whole chunks of the K range), and the chunk that follows.
void set_splits(Plan& p, int splits);
/// The CTA's chunk buffers of x, then each warp's ring of weight tiles.
std::size_t smem_bytes(const Plan& p);
/// The fp32 partial sums of the K splits (0 without a split).
std::size_t partial_bytes(const Plan& p, std::int64_t m, std::int64_t n);
Form form_of(const W4A16Weights& w);

}  // namespace pagoda::kernels::w4a16
