#include "engine/kv_cache_sizing.h"

#include <algorithm>

namespace pagoda::engine {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

bool uses_groups(const ModelExecutorInfo& info, bool single_group) {
  return info.num_kv_groups() > 1 && !single_group;
}

}  // namespace

std::int64_t kv_page_bytes(const ModelExecutorInfo& info, std::int64_t bytes_per_block,
                           bool single_group) {
  if (!uses_groups(info, single_group)) return bytes_per_block;
  std::int64_t slots = 0;
  for (std::int64_t g = 0; g < info.num_kv_groups(); ++g) {
    slots = std::max(slots, info.num_layers_in_kv_group(g));
  }
  return bytes_per_block / info.num_layers * slots;
}

void size_kv_groups(std::int64_t budget, std::int64_t bytes_per_block,
                    const ModelExecutorInfo& info, const KvSizingLimits& limits,
                    CacheConfig& cache) {
  cache.sliding_windows.clear();
  if (uses_groups(info, limits.single_group)) {
    cache.sliding_windows.assign(info.kv_group_windows.begin() + 1, info.kv_group_windows.end());
  }
  cache.num_blocks =
      std::max<std::int64_t>(budget, 0) /
      (kv_page_bytes(info, bytes_per_block, limits.single_group) + limits.extra_bytes_per_block);
}

std::int64_t kv_blocks_per_request(const CacheConfig& cache, std::int64_t num_tokens,
                                   std::int64_t max_num_batched_tokens) {
  const std::int64_t full = ceil_div(num_tokens, cache.block_size);
  std::int64_t blocks = full;
  for (const std::int64_t window : cache.sliding_windows) {
    // The window behind the step's first query, and the step's own tokens.
    blocks += std::min(full, ceil_div(window - 1 + max_num_batched_tokens, cache.block_size) + 1);
  }
  return blocks;
}

std::int64_t kv_bytes_for_full_load(std::int64_t bytes_per_block, const ModelExecutorInfo& info,
                                    const KvSizingLimits& limits) {
  CacheConfig cache;
  cache.block_size = limits.block_size;
  size_kv_groups(0, bytes_per_block, info, limits, cache);
  // Running requests hold a window each; one step's tokens come on top, once.
  const std::int64_t per_request = kv_blocks_per_request(cache, limits.max_model_len, 1);
  const std::int64_t step =
      kv_blocks_per_request(cache, limits.max_model_len, limits.max_num_batched_tokens) -
      per_request;
  return (limits.max_num_seqs * per_request + step) *
         (kv_page_bytes(info, bytes_per_block, limits.single_group) + limits.extra_bytes_per_block);
}

}  // namespace pagoda::engine
