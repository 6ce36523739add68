// Settings of the paged KV cache, validated once at startup.
#pragma once

#include <cstdint>

#include "pagoda/status.h"

namespace pagoda::engine {

/// Paged KV-cache settings (vLLM names: --block-size, --enable-prefix-caching).
struct CacheConfig {
  /// Blocks in the pool; the engine derives it from the memory budget.
  std::int64_t num_blocks = 0;
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
