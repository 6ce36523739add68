// How a KV memory budget becomes a pool of blocks (kv_cache_manager.h).
//
// One table for every layer (no sliding-window layers, or --disable-hybrid-kv-cache-manager):
// a block holds block_size tokens of every layer, num_blocks = budget / bytes_per_block.
//
// KV groups: a block is a page of S layers' memory, S the most layers in a group (the executor
// lays each group's k-th layer over slot k), and every group takes its blocks from the one pool,
// so num_blocks = budget / (bytes_per_block * S / num_layers). Nothing is split ahead of time:
// a full group's block and a sliding group's cost the same page, and the pool serves whichever
// needs it. Gemma 3 270M (18 layers: 3 full, 15 sliding in 5 groups of 3, window 512): a page
// is a sixth of a one-table block, and a 32k-token request takes 2,048 pages for its full layers
// and 5 x 33 for the sliding ones, 2,213 where one table took 6 x 2,048 (docs/perf/).
#pragma once

#include <cstdint>

#include "engine/cache_config.h"
#include "pagoda/model_executor.h"

namespace pagoda::engine {

/// What the sizing rule needs besides the budget.
struct KvSizingLimits {
  std::int64_t block_size = 16;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_seqs = 0;
  std::int64_t max_num_batched_tokens = 0;
  /// Bytes a block costs besides the model's (a draft model's pool of as many blocks; 0
  /// without one).
  std::int64_t extra_bytes_per_block = 0;
  /// One table for every layer even when the model has sliding-window layers.
  bool single_group = false;
};

/// Bytes one block of the pool takes: `bytes_per_block` (the executor's, every layer) with one
/// table, the share of S layers with KV groups.
std::int64_t kv_page_bytes(const ModelExecutorInfo& info, std::int64_t bytes_per_block,
                           bool single_group);

/// Fills cache.num_blocks and cache.sliding_windows from `budget` bytes; `bytes_per_block` is
/// the executor's kv_cache_bytes_per_block (all layers).
void size_kv_groups(std::int64_t budget, std::int64_t bytes_per_block,
                    const ModelExecutorInfo& info, const KvSizingLimits& limits,
                    CacheConfig& cache);

/// The bytes max_num_seqs requests of max_model_len tokens need at once (the default budget's
/// wish), each sliding group holding a window and a step's chunk per request.
std::int64_t kv_bytes_for_full_load(std::int64_t bytes_per_block, const ModelExecutorInfo& info,
                                    const KvSizingLimits& limits);

/// Blocks one request of `num_tokens` tokens holds at most (one step of up to
/// `max_num_batched_tokens` in): every group's blocks for a full table, the window's and the
/// step's for a sliding group.
std::int64_t kv_blocks_per_request(const CacheConfig& cache, std::int64_t num_tokens,
                                   std::int64_t max_num_batched_tokens);

}  // namespace pagoda::engine
