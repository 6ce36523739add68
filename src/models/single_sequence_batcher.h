// ForwardBatches for one sequence whose KV lives in blocks 0, 1, 2, ... of the pool: the trivial
// allocator `pagoda generate` and the model tests use beside the engine's KV-cache manager.
//
// With sliding-window KV groups (kv_cache_groups.h), which share one pool, group 0 keeps blocks
// 0..n-1 and each sliding group g a ring of R = ceil((max_chunk + window - 1) / bs) + 1 blocks
// after them (n + (g-1) R ..), the most one step's queries and their windows span: table entry
// i is the ring's block i % R from the window of the step's first query on, -1 below it. bs 4,
// window 6, n 4, R 3, a step at positions 13..14 (keys 8..14):
//
//   full group     [0, 1, 2, 3]      slot(p) = p
//   sliding group  [-1, -1, 6, 4]    ring 4..6; slot(13) = 4 * 4 + 1: block 4 held 0..3 before
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagoda/forward_batch.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Appends tokens to one sequence, a chunk per forward pass.
class SingleSequenceBatcher {
 public:
  /// A sequence of at most num_blocks * block_size tokens. `sliding_windows`: the windows of the
  /// executor's KV groups 1.. (ModelExecutorInfo::kv_group_windows), whose tables then go in
  /// ForwardBatch::kv_groups over rings sized for steps of at most `max_chunk` tokens (0: any).
  SingleSequenceBatcher(std::int64_t block_size, std::int64_t num_blocks,
                        std::vector<std::int64_t> sliding_windows = {}, std::int64_t max_chunk = 0);

  /// One sequence of up to `max_len` tokens of `info`'s model in steps of at most `max_chunk`:
  /// a ring per sliding KV group when the model has them (num_kv_groups() > 1), one table for
  /// every layer when it has none or `single_table` (--disable-hybrid-kv-cache-manager).
  static SingleSequenceBatcher for_model(const ModelExecutorInfo& info, std::int64_t block_size,
                                         std::int64_t max_len, std::int64_t max_chunk,
                                         bool single_table);

  /// Allocates the pool these tables index on `executor` (info() as given to for_model):
  /// allocate_kv_cache_groups with sliding groups, else allocate_kv_cache.
  Status allocate(ModelExecutor& executor) const;

  /// The pool's size in blocks of one layer (K and V): num_pool_blocks() times the layers a
  /// block spans (the largest group's with groups, every layer without), which compares the two
  /// layouts and a memory budget in one unit.
  std::int64_t num_layer_blocks(const ModelExecutorInfo& info) const;

  /// Blocks of the pool the groups share (ModelExecutor::allocate_kv_cache_groups): num_blocks,
  /// plus each sliding group's ring.
  std::int64_t num_pool_blocks() const;
  /// Each sliding group's ring, in blocks.
  const std::vector<std::int64_t>& ring_blocks() const { return ring_blocks_; }

  /// Fills `batch` for `tokens` placed after the ones already cached, with logits for the last
  /// of them, and counts them as cached. OUT_OF_RANGE when the blocks are full.
  Status next(std::span<const std::int32_t> tokens, ForwardBatch& batch);

  /// Tokens in the cache (after the last next()).
  std::int64_t num_cached() const { return num_cached_; }
  /// Most tokens the sequence can hold.
  std::int64_t capacity() const { return block_size_ * num_blocks_; }

 private:
  std::int64_t block_size_;
  std::int64_t num_blocks_;
  std::int64_t num_cached_ = 0;
  std::int64_t max_chunk_;
  std::vector<std::int64_t> sliding_windows_;
  std::vector<std::int64_t> ring_blocks_;  // per sliding group
};

}  // namespace pagoda::models
