// ForwardBatches for one sequence whose KV lives in blocks 0, 1, 2, ... of the pool: the trivial
// allocator `pagoda generate` and the model tests use until the engine's KV-cache manager exists.
#pragma once

#include <cstdint>
#include <span>

#include "pagoda/forward_batch.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Appends tokens to one sequence, a chunk per forward pass.
class SingleSequenceBatcher {
 public:
  /// A sequence of at most num_blocks * block_size tokens.
  SingleSequenceBatcher(std::int64_t block_size, std::int64_t num_blocks);

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
};

}  // namespace pagoda::models
