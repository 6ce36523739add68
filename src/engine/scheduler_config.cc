#include "engine/scheduler_config.h"

#include <string>

#include "engine/kv_cache_sizing.h"

namespace pagoda::engine {

Status SchedulerConfig::validate(const CacheConfig& cache) const {
  PAGODA_RETURN_IF_ERROR(cache.validate());
  if (max_num_batched_tokens < 1) {
    return invalid_argument("max_num_batched_tokens is " + std::to_string(max_num_batched_tokens) +
                            "; it must be at least 1");
  }
  if (max_num_seqs < 1) {
    return invalid_argument("max_num_seqs is " + std::to_string(max_num_seqs) +
                            "; it must be at least 1");
  }
  if (max_model_len < 2) {
    return invalid_argument("max_model_len is " + std::to_string(max_model_len) +
                            "; it must be at least 2 (one prompt and one generated token)");
  }
  if (long_prefill_token_threshold < 0) {
    return invalid_argument("long_prefill_token_threshold is " +
                            std::to_string(long_prefill_token_threshold) +
                            "; use 0 (off) or a positive token count");
  }
  // The pool must hold one max_model_len request: every block of a full table, and a sliding
  // group's window beside a step's tokens (kv_cache_sizing.h).
  const std::int64_t needed = kv_blocks_per_request(cache, max_model_len, max_num_batched_tokens);
  if (cache.num_blocks < needed) {
    return invalid_argument("the KV cache holds " + std::to_string(cache.num_blocks) +
                            " blocks of " + std::to_string(cache.block_size) +
                            " tokens, fewer than the " + std::to_string(needed) +
                            " one request of max_model_len " + std::to_string(max_model_len) +
                            " tokens needs; lower --max-model-len or give the cache more memory");
  }
  return Status::ok_status();
}

}  // namespace pagoda::engine
