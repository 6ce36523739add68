#include "models/single_sequence_batcher.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace pagoda::models {

SingleSequenceBatcher::SingleSequenceBatcher(std::int64_t block_size, std::int64_t num_blocks,
                                             std::vector<std::int64_t> sliding_windows,
                                             std::int64_t max_chunk)
    : block_size_(block_size),
      num_blocks_(num_blocks),
      max_chunk_(max_chunk > 0 ? max_chunk : block_size * num_blocks),
      sliding_windows_(std::move(sliding_windows)) {
  PAGODA_CHECK(block_size > 0 && num_blocks > 0) << block_size << " x " << num_blocks;
  for (const std::int64_t window : sliding_windows_) {
    PAGODA_CHECK(window > 0) << "sliding window " << window;
    ring_blocks_.push_back(
        std::min(num_blocks_, (max_chunk_ + window - 1 + block_size - 1) / block_size + 1));
  }
}

SingleSequenceBatcher SingleSequenceBatcher::for_model(const ModelExecutorInfo& info,
                                                       std::int64_t block_size,
                                                       std::int64_t max_len, std::int64_t max_chunk,
                                                       bool single_table) {
  std::vector<std::int64_t> windows;
  if (!single_table) windows.assign(info.kv_group_windows.begin() + 1, info.kv_group_windows.end());
  return SingleSequenceBatcher(block_size, (max_len + block_size - 1) / block_size,
                               std::move(windows), max_chunk);
}

Status SingleSequenceBatcher::allocate(ModelExecutor& executor) const {
  return sliding_windows_.empty()
             ? executor.allocate_kv_cache(num_pool_blocks(), block_size_)
             : executor.allocate_kv_cache_groups(num_pool_blocks(), block_size_);
}

std::int64_t SingleSequenceBatcher::num_layer_blocks(const ModelExecutorInfo& info) const {
  if (sliding_windows_.empty()) return num_pool_blocks() * info.num_layers;
  std::int64_t layers_per_block = 0;
  for (std::int64_t g = 0; g < info.num_kv_groups(); ++g) {
    layers_per_block = std::max(layers_per_block, info.num_layers_in_kv_group(g));
  }
  return num_pool_blocks() * layers_per_block;
}

std::int64_t SingleSequenceBatcher::num_pool_blocks() const {
  std::int64_t blocks = num_blocks_;
  for (const std::int64_t ring : ring_blocks_) blocks += ring;
  return blocks;
}

// Block i of the sequence is pool block i, so position p sits at slot p:
//
//   block table  [0, 1, 2, ...]        slot(p) = table[p / bs] * bs + p % bs = p
Status SingleSequenceBatcher::next(std::span<const std::int32_t> tokens, ForwardBatch& batch) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) return invalid_argument("no tokens to run");
  if (n > max_chunk_) {
    return invalid_argument(std::to_string(n) + " tokens in one step, over the " +
                            std::to_string(max_chunk_) + " the sliding-window rings hold");
  }
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
  batch.kv_groups.resize(sliding_windows_.size());
  const std::int64_t start = num_cached_ - n;
  std::int64_t ring_start = num_blocks_;
  for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
    ForwardBatch::KvGroupTables& group = batch.kv_groups[g];
    const std::int64_t ring = ring_blocks_[g];
    const std::int64_t first =
        std::max<std::int64_t>(0, start - sliding_windows_[g] + 1) / block_size_;
    for (std::int64_t b = 0; b < num_blocks_; ++b) {
      group.block_tables.push_back(b < first ? -1
                                             : static_cast<std::int32_t>(ring_start + b % ring));
    }
    for (std::int64_t p = start; p < num_cached_; ++p) {
      group.slot_mapping.push_back((ring_start + (p / block_size_) % ring) * block_size_ +
                                   p % block_size_);
    }
    ring_start += ring;
  }
  return Status::ok_status();
}

}  // namespace pagoda::models
