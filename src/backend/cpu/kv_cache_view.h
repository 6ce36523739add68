// One layer's paged KV cache as the attention kernels see it, and the op that fills it.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// Element type of the K and V pools.
enum class KvDtype {
  kF32,
  kF16,  ///< IEEE binary16 bits, rounded to nearest even: half the bytes attention streams.
};

/// K and V pools of one layer, fp32 (k, v) or fp16 (k_f16, v_f16), laid out [num_blocks,
/// block_size, num_kv_heads, head_dim]. A token's slot is block_id * block_size + offset; all heads
/// of a slot are contiguous, so one token's K (or V) is a single run of num_kv_heads * head_dim
/// floats:
///
///   block b:  | slot b*bs+0          | slot b*bs+1          | ... | slot b*bs+bs-1 |
///             | h0[0:D] h1[0:D] ...  | h0[0:D] h1[0:D] ...  |     |                |
///
///   k[slot, h, d] = k[(slot * num_kv_heads + h) * head_dim + d]
struct KvCacheView {
  float* k = nullptr;  ///< [num_blocks, block_size, num_kv_heads, head_dim], kF32 only.
  float* v = nullptr;  ///< [num_blocks, block_size, num_kv_heads, head_dim], kF32 only.
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  KvDtype dtype = KvDtype::kF32;
  std::uint16_t* k_f16 = nullptr;  ///< As k, kF16 only.
  std::uint16_t* v_f16 = nullptr;  ///< As v, kF16 only.

  /// Elements from one slot to the next.
  std::int64_t slot_stride() const { return num_kv_heads * head_dim; }
};

/// Bytes of one stored K or V element.
inline std::int64_t kv_element_bytes(KvDtype dtype) {
  return dtype == KvDtype::kF16 ? 2 : 4;
}

/// k[slot, h, d] or v[slot, h, d] as fp32 whatever the pool's type (for references and tests).
float kv_at(const KvCacheView& cache, bool value, std::int64_t slot, std::int64_t h,
            std::int64_t d);

/// Stores token t's K and V at slot slot_mapping[t] (rounded to nearest even for kF16); a
/// negative slot marks a padding token and is skipped.
void write_kv(const float* k /* [num_tokens, num_kv_heads, head_dim] */,
              const float* v /* [num_tokens, num_kv_heads, head_dim] */,
              const std::int64_t* slot_mapping /* [num_tokens] */, std::int64_t num_tokens,
              const KvCacheView& cache);

}  // namespace pagoda::cpu
