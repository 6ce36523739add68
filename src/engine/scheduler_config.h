// Settings of the scheduler, validated once at startup against the cache they schedule into.
#pragma once

#include <cstdint>

#include "engine/cache_config.h"
#include "engine/scheduling_policy.h"
#include "pagoda/status.h"

namespace pagoda::engine {

/// Step limits and policy (vLLM flag names).
struct SchedulerConfig {
  /// Token budget of one step (--max-num-batched-tokens): prefill chunks and decodes together.
  std::int64_t max_num_batched_tokens = 2048;
  /// Most requests running at once (--max-num-seqs).
  std::int64_t max_num_seqs = 256;
  /// Longest sequence, prompt + output (--max-model-len).
  std::int64_t max_model_len = 2048;
  /// When > 0, no request gets more than this many tokens in one step, so a long prompt is
  /// prefilled in slices and cannot hold back the others (--long-prefill-token-threshold).
  std::int64_t long_prefill_token_threshold = 0;
  /// Admission and preemption order (--scheduling-policy).
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;

  /// INVALID_ARGUMENT that names the field, including when `cache` cannot hold one sequence of
  /// max_model_len tokens.
  Status validate(const CacheConfig& cache) const;
};

}  // namespace pagoda::engine
