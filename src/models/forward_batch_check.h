// Checks a ForwardBatch against the executor's limits before any kernel indexes with it, so a
// runner bug or a bad token id is an INVALID_ARGUMENT, not an out-of-bounds write.
#pragma once

#include <cstdint>
#include <span>

#include "pagoda/forward_batch.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// What a batch must fit in.
struct ForwardBatchLimits {
  std::int64_t vocab_size = 0;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_batched_tokens = 0;
  std::int64_t num_blocks = 0;  ///< Blocks in the KV pool.
  std::int64_t block_size = 0;  ///< Tokens per block.
  /// The windows of KV groups 1.. (a model with sliding-window layers), whose tables name
  /// blocks of the same pool; a batch's kv_groups must be empty or match them.
  std::span<const std::int64_t> group_windows;
};

/// OK when every array has its documented length and every index is in range.
Status check_forward_batch(const ForwardBatch& batch, const ForwardBatchLimits& limits);

}  // namespace pagoda::models
