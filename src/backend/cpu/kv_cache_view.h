// One layer's paged KV cache as the attention kernels see it, and the op that fills it.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// K and V pools of one layer, fp32, both laid out [num_blocks, block_size, num_kv_heads,
/// head_dim]. A token's slot is block_id * block_size + offset; all heads of a slot are
/// contiguous, so one token's K (or V) is a single run of num_kv_heads * head_dim floats:
///
///   block b:  | slot b*bs+0          | slot b*bs+1          | ... | slot b*bs+bs-1 |
///             | h0[0:D] h1[0:D] ...  | h0[0:D] h1[0:D] ...  |     |                |
///
///   k[slot, h, d] = k[(slot * num_kv_heads + h) * head_dim + d]
struct KvCacheView {
  float* k = nullptr;  ///< [num_blocks, block_size, num_kv_heads, head_dim]
  float* v = nullptr;  ///< [num_blocks, block_size, num_kv_heads, head_dim]
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;

  /// Floats from one slot to the next.
  std::int64_t slot_stride() const { return num_kv_heads * head_dim; }
};

/// Stores token t's K and V at slot slot_mapping[t]; a negative slot marks a padding token
/// and is skipped.
void write_kv(const float* k /* [num_tokens, num_kv_heads, head_dim] */,
              const float* v /* [num_tokens, num_kv_heads, head_dim] */,
              const std::int64_t* slot_mapping /* [num_tokens] */, std::int64_t num_tokens,
              const KvCacheView& cache);

}  // namespace pagoda::cpu
