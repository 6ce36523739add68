// Several sequences through one executor (CPU or CUDA), each step one ForwardBatch of whichever
// sequences are scheduled with however many tokens each: prompt chunks beside decodes, which is
// what the CUDA executor's mixed steps are made of. Each sequence keeps its own
// SingleSequenceBatcher (its blocks, and with sliding-window KV groups its rings) over its own
// range of one shared pool; a step's batch is theirs concatenated, block ids and slots shifted
// by the sequence's range:
//
//   pool   | seq 0: blocks 0..P-1 | seq 1: P..2P-1 | ...      (P = one batcher's pool blocks)
//   step   seq 0: 25 tokens, seq 1: 1, seq 2: 1  ->  query_start_loc [0, 25, 26, 27]
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "models/single_sequence_batcher.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_executor.h"

namespace pagoda::gpu_test {

class MultiSequenceRun {
 public:
  /// `num_seqs` sequences of at most `max_len` tokens, steps of at most `max_chunk` tokens per
  /// sequence (the sliding rings' size); KV groups when the executor has them.
  MultiSequenceRun(ModelExecutor& executor, int num_seqs, std::int64_t block_size,
                   std::int64_t max_len, std::int64_t max_chunk)
      : executor_(executor), block_size_(block_size) {
    const ModelExecutorInfo& info = executor.info();
    const bool groups = info.num_kv_groups() > 1;
    const std::vector<std::int64_t> windows =
        groups ? std::vector<std::int64_t>(info.kv_group_windows.begin() + 1,
                                           info.kv_group_windows.end())
               : std::vector<std::int64_t>{};
    for (int s = 0; s < num_seqs; ++s) {
      batchers_.emplace_back(block_size, (max_len + block_size - 1) / block_size, windows,
                             max_chunk);
    }
    pool_per_seq_ = batchers_.front().num_pool_blocks();
    const std::int64_t blocks = pool_per_seq_ * num_seqs;
    const Status s = groups ? executor.allocate_kv_cache_groups(blocks, block_size)
                            : executor.allocate_kv_cache(blocks, block_size);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }

  /// One step: tokens[s] for sequence s (empty: not scheduled). Returns the logits of each
  /// scheduled sequence's last token, [scheduled, vocab], in sequence order.
  std::vector<float> step(const std::vector<std::vector<std::int32_t>>& tokens) {
    ForwardBatch batch;
    batch.query_start_loc.push_back(0);
    for (std::size_t s = 0; s < batchers_.size(); ++s) {
      if (s >= tokens.size() || tokens[s].empty()) continue;
      ForwardBatch one;
      const Status next = batchers_[s].next(tokens[s], one);
      EXPECT_TRUE(next.ok()) << next.to_string();
      append(one, static_cast<std::int64_t>(s) * pool_per_seq_, batch);
    }
    const auto vocab = static_cast<std::size_t>(executor_.info().vocab_size);
    std::vector<float> logits(vocab * batch.logits_indices.size());
    const Status s = executor_.forward(batch, logits.data());
    EXPECT_TRUE(s.ok()) << s.to_string();
    return logits;
  }

 private:
  // Appends one sequence's batch with its blocks shifted by `first_block` (-1 stays -1).
  void append(const ForwardBatch& one, std::int64_t first_block, ForwardBatch& batch) const {
    const auto shift_block = [&](std::int32_t b) {
      return b < 0 ? b : static_cast<std::int32_t>(b + first_block);
    };
    const auto shift_slot = [&](std::int64_t slot) {
      return slot < 0 ? slot : slot + first_block * block_size_;
    };
    const auto token0 = static_cast<std::int32_t>(batch.token_ids.size());
    batch.token_ids.insert(batch.token_ids.end(), one.token_ids.begin(), one.token_ids.end());
    batch.positions.insert(batch.positions.end(), one.positions.begin(), one.positions.end());
    for (const std::int64_t slot : one.slot_mapping) batch.slot_mapping.push_back(shift_slot(slot));
    batch.query_start_loc.push_back(token0 + one.query_start_loc.back());
    batch.seq_lens.push_back(one.seq_lens.front());
    batch.max_blocks_per_seq = one.max_blocks_per_seq;
    for (const std::int32_t b : one.block_tables) batch.block_tables.push_back(shift_block(b));
    for (const std::int32_t row : one.logits_indices) batch.logits_indices.push_back(token0 + row);
    batch.kv_groups.resize(one.kv_groups.size());
    for (std::size_t g = 0; g < one.kv_groups.size(); ++g) {
      for (const std::int32_t b : one.kv_groups[g].block_tables) {
        batch.kv_groups[g].block_tables.push_back(shift_block(b));
      }
      for (const std::int64_t slot : one.kv_groups[g].slot_mapping) {
        batch.kv_groups[g].slot_mapping.push_back(shift_slot(slot));
      }
    }
  }

  ModelExecutor& executor_;
  std::int64_t block_size_;
  std::vector<models::SingleSequenceBatcher> batchers_;
  std::int64_t pool_per_seq_ = 0;
};

}  // namespace pagoda::gpu_test
