// The GPU paged KV cache of one layer, as the RoPE/append and attention kernels see it.
#pragma once

#include <cstdint>

namespace pagoda::kernels {

/// The GPU paged KV cache of one layer. Unlike the CPU pool, one KV head's page is contiguous, so
/// a decode CTA that owns one head reads whole pages with 16-byte loads:
///
///   k[block, kv_head, offset, d] = k[((block * num_kv_heads + kv_head) * block_size + offset)
///                                    * head_dim + d]
///   token at slot s: block = s / block_size, offset = s % block_size
struct PagedKvCache {
  void* k = nullptr;  ///< [num_blocks, num_kv_heads, block_size, head_dim], dtype
  void* v = nullptr;  ///< [num_blocks, num_kv_heads, block_size, head_dim], dtype
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
};

}  // namespace pagoda::kernels
