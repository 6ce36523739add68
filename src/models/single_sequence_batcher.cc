#include "models/single_sequence_batcher.h"

#include <string>

#include "common/check.h"

namespace pagoda::models {

SingleSequenceBatcher::SingleSequenceBatcher(std::int64_t block_size, std::int64_t num_blocks)
    : block_size_(block_size), num_blocks_(num_blocks) {
  PAGODA_CHECK(block_size > 0 && num_blocks > 0) << block_size << " x " << num_blocks;
}

// Block i of the sequence is pool block i, so position p sits at slot p:
//
//   block table  [0, 1, 2, ...]        slot(p) = table[p / bs] * bs + p % bs = p
Status SingleSequenceBatcher::next(std::span<const std::int32_t> tokens, ForwardBatch& batch) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) return invalid_argument("no tokens to run");
  if (num_cached_ + n > capacity()) {
    return out_of_range("the sequence would reach " + std::to_string(num_cached_ + n) +
                        " tokens, more than its KV cache holds (" + std::to_string(capacity()) +
                        ")");
  }
  batch.clear();
  batch.token_ids.assign(tokens.begin(), tokens.end());
  for (std::int64_t i = 0; i < n; ++i) {
    batch.positions.push_back(static_cast<std::int32_t>(num_cached_ + i));
    batch.slot_mapping.push_back(num_cached_ + i);
  }
  num_cached_ += n;
  batch.query_start_loc = {0, static_cast<std::int32_t>(n)};
  batch.seq_lens = {static_cast<std::int32_t>(num_cached_)};
  batch.max_blocks_per_seq = num_blocks_;
  for (std::int64_t b = 0; b < num_blocks_; ++b) {
    batch.block_tables.push_back(static_cast<std::int32_t>(b));
  }
  batch.logits_indices = {static_cast<std::int32_t>(n - 1)};
  return Status::ok_status();
}

}  // namespace pagoda::models
