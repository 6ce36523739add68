// Settings of the paged KV cache, validated once at startup.
#pragma once

#include <cstdint>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::engine {

/// Paged KV-cache settings (vLLM names: --block-size, --enable-prefix-caching).
struct CacheConfig {
  /// Blocks in the pool; the engine derives it from the memory budget. With KV groups the pool
  /// is shared: a block is one page of every group's memory (kv_cache_manager.h).
  std::int64_t num_blocks = 0;
  /// The windows of KV groups 1.., the model's sliding-window layers, each group with its own
  /// tables in the shared pool (the engine takes them from ModelExecutorInfo::kv_group_windows).
  /// Empty: one table for every layer.
  std::vector<std::int64_t> sliding_windows;
  /// Tokens per block.
  std::int64_t block_size = 16;
  /// Reuse K/V of identical prompt prefixes across requests.
  bool enable_prefix_caching = true;
  /// Seeds prefix-cache keys; a secret value makes keys unpredictable (see block_hash.h).
  std::uint64_t prefix_hash_seed = 0;

  /// INVALID_ARGUMENT naming the field and the accepted range.
  Status validate() const;
};

}  // namespace pagoda::engine
