// Shared by the model tests (CPU, and the GPU golden test): open a model into a CPU executor and
// run one sequence through any executor.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/cpu_model_executor.h"
#include "models/single_sequence_batcher.h"
#include "sampling/sampler.h"

namespace pagoda::models::testing {

/// A model ready to run: the executor keeps the files alive.
inline std::unique_ptr<CpuModelExecutor> open_executor(const std::string& path,
                                                       std::int64_t max_tokens,
                                                       int num_threads = 2) {
  auto files = open_model_files(path);
  EXPECT_TRUE(files.ok()) << files.status().to_string();
  if (!files.ok()) return nullptr;
  auto executor =
      CpuModelExecutor::create(std::make_shared<const ModelFiles>(std::move(*files)),
                               {.num_threads = num_threads, .max_num_batched_tokens = max_tokens});
  EXPECT_TRUE(executor.ok()) << executor.status().to_string();
  return executor.ok() ? std::move(*executor) : nullptr;
}

/// One sequence fed to an executor (CPU or CUDA) chunk by chunk, with blocks 0..n-1. A model
/// with sliding-window layers runs them on their own KV group's ring of blocks
/// (single_sequence_batcher.h), sized for steps of at most `max_chunk` tokens (0: any), unless
/// `kv_groups` is false (one table for every layer).
class SequenceRun {
 public:
  SequenceRun(ModelExecutor& executor, std::int64_t block_size, std::int64_t max_len,
              std::int64_t max_chunk = 0, bool kv_groups = true)
      : executor_(executor),
        batcher_(block_size, (max_len + block_size - 1) / block_size,
                 kv_groups ? std::vector<std::int64_t>(executor.info().kv_group_windows.begin() + 1,
                                                       executor.info().kv_group_windows.end())
                           : std::vector<std::int64_t>{},
                 max_chunk),
        logits_(static_cast<std::size_t>(executor.info().vocab_size)) {
    Status s = kv_groups && executor.info().num_kv_groups() > 1
                   ? executor.allocate_kv_cache_groups(batcher_.num_pool_blocks(), block_size)
                   : executor.allocate_kv_cache(batcher_.num_pool_blocks(), block_size);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }

  /// Each sliding KV group's ring of blocks (empty without groups).
  const std::vector<std::int64_t>& ring_blocks() const { return batcher_.ring_blocks(); }

  /// Runs `tokens` as one step; returns the logits of the rows in `rows` (default: the last),
  /// each [vocab], concatenated.
  std::vector<float> step(std::span<const std::int32_t> tokens,
                          std::vector<std::int32_t> rows = {}) {
    Status s = batcher_.next(tokens, batch_);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!rows.empty()) batch_.logits_indices = std::move(rows);
    std::vector<float> out(logits_.size() * batch_.logits_indices.size());
    s = executor_.forward(batch_, out.data());
    EXPECT_TRUE(s.ok()) << s.to_string();
    return out;
  }

  /// Feeds `prompt` in steps of at most `chunk` tokens (chunked prefill); the last step's logits.
  std::vector<float> prefill(std::span<const std::int32_t> prompt, std::int64_t chunk) {
    std::vector<float> logits;
    const auto n = static_cast<std::int64_t>(prompt.size());
    for (std::int64_t begin = 0; begin < n; begin += chunk) {
      logits = step(prompt.subspan(begin, std::min(chunk, n - begin)));
    }
    return logits;
  }

  /// Greedy continuation of `num_tokens` tokens after `last_logits`.
  std::vector<std::int32_t> greedy(std::vector<float> last_logits, int num_tokens) {
    std::vector<std::int32_t> out;
    for (int i = 0; i < num_tokens; ++i) {
      const std::int32_t token = sampling::argmax(last_logits);
      out.push_back(token);
      if (i + 1 < num_tokens) last_logits = step(std::span(&token, 1));
    }
    return out;
  }

 private:
  ModelExecutor& executor_;
  SingleSequenceBatcher batcher_;
  ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace pagoda::models::testing
