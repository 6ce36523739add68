// The GPU paged KV cache of one layer, as the RoPE/append and attention kernels see it.
#pragma once

#include <cstdint>

namespace pagoda::kernels {

/// What a cached K or V element is: the activations' dtype (PagedAttentionParams::dtype,
/// RopeKvCacheParams::dtype), or an FP8 E4M3 code (--kv-cache-dtype fp8: half the bytes of bf16
/// per token, so twice the tokens in the same memory and half the bytes decode attention reads).
enum class KvCacheStorage { kActivations, kFp8E4M3 };

/// The GPU paged KV cache of one layer. Unlike the CPU pool, one KV head's page is contiguous, so
/// a decode CTA that owns one head reads whole pages with 16-byte loads:
///
///   k[block, kv_head, offset, d] = k[((block * num_kv_heads + kv_head) * block_size + offset)
///                                    * head_dim + d]
///   token at slot s: block = s / block_size, offset = s % block_size
struct PagedKvCache {
  void* k = nullptr;  ///< [num_blocks, num_kv_heads, block_size, head_dim], `storage`
  void* v = nullptr;  ///< [num_blocks, num_kv_heads, block_size, head_dim], `storage`
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  KvCacheStorage storage = KvCacheStorage::kActivations;
  /// kFp8E4M3: the cache holds e4m3(k / k_scale) and e4m3(v / v_scale) (vLLM's per-tensor
  /// scales); the kernels read code * scale. 1 unless a checkpoint calibrated them.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

/// Bytes of one cached element: the activations' `activation_bytes`, or 1 for FP8.
inline std::int64_t kv_cache_element_bytes(KvCacheStorage storage, std::int64_t activation_bytes) {
  return storage == KvCacheStorage::kFp8E4M3 ? 1 : activation_bytes;
}

}  // namespace pagoda::kernels
