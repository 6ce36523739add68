#include "engine/engine_config.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "engine/kv_cache_sizing.h"
#include "pagoda/sampling_params.h"

namespace pagoda::engine {

namespace {

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return EngineConfig::kDefaultKvCacheBytesCap * 4;
  return std::int64_t{pages} * page_size;
}

std::int64_t default_kv_bytes(std::int64_t bytes_per_block, const ModelExecutorInfo& info,
                              const KvSizingLimits& limits) {
  const std::int64_t wanted = kv_bytes_for_full_load(bytes_per_block, info, limits);
  const std::int64_t cap =
      std::min(EngineConfig::kDefaultKvCacheBytesCap, physical_memory_bytes() / 4);
  return std::min(wanted, cap);
}

}  // namespace

StatusOr<EngineConfig> resolve_engine_config(EngineConfig config, const ModelExecutor& executor) {
  const ModelExecutorInfo& info = executor.info();
  SchedulerConfig& sched = config.scheduler;
  if (sched.max_model_len == 0) sched.max_model_len = info.max_model_len;
  if (sched.max_model_len > info.max_model_len) {
    return invalid_argument("--max-model-len " + std::to_string(sched.max_model_len) +
                            " is over the model's limit of " + std::to_string(info.max_model_len));
  }
  if (sched.max_num_batched_tokens > info.max_num_batched_tokens) {
    return invalid_argument("--max-num-batched-tokens " +
                            std::to_string(sched.max_num_batched_tokens) +
                            " is over what the executor was built for (" +
                            std::to_string(info.max_num_batched_tokens) + ")");
  }
  if (config.max_waiting_requests < 0) {
    return invalid_argument("--max-waiting-requests must be >= 0");
  }
  if (!(config.trace_sample_rate >= 0.0 && config.trace_sample_rate <= 1.0)) {
    return invalid_argument("--trace-sample-rate must be in [0, 1]");
  }
  if (config.trace_top_n < 0 || config.trace_top_n > SamplingParams::kMaxLogprobs) {
    return invalid_argument("--trace-top-n must be in [0, " +
                            std::to_string(SamplingParams::kMaxLogprobs) + "]");
  }
  if (config.output_channel_capacity < 1) {
    return invalid_argument("output_channel_capacity must be at least 1");
  }
  if (config.cache.block_size < 1 || config.cache.block_size > 1024) {
    return invalid_argument("--block-size must be in [1, 1024] (16 is the usual choice)");
  }
  if (config.cache.num_blocks == 0) {
    const std::int64_t per_block = executor.kv_cache_bytes_per_block(config.cache.block_size);
    if (config.kv_cache_memory_bytes && *config.kv_cache_memory_bytes <= 0) {
      return invalid_argument("--kv-cache-memory must be a positive number of bytes");
    }
    KvSizingLimits limits{.block_size = config.cache.block_size,
                          .max_model_len = sched.max_model_len,
                          .max_num_seqs = sched.max_num_seqs,
                          .max_num_batched_tokens = sched.max_num_batched_tokens,
                          .single_group = config.disable_hybrid_kv_cache_manager};
    // A draft model's pool gets as many blocks as the target's. With KV groups a target block
    // is a fraction of a one-table block, so the same budget makes several times the blocks:
    // the draft's then come out of the budget too, or its pool would grow with them. A draft
    // with sliding layers keeps KV groups too, its blocks pages of its own groups' layers.
    if (config.draft_executor != nullptr && info.num_kv_groups() > 1 && !limits.single_group) {
      const ModelExecutor& draft = *config.draft_executor;
      limits.extra_bytes_per_block =
          kv_page_bytes(draft.info(), draft.kv_cache_bytes_per_block(config.cache.block_size),
                        limits.single_group);
    }
    const std::int64_t budget =
        config.kv_cache_memory_bytes.value_or(default_kv_bytes(per_block, info, limits));
    size_kv_groups(budget, per_block, info, limits, config.cache);
    const std::int64_t needed =
        kv_blocks_per_request(config.cache, sched.max_model_len, sched.max_num_batched_tokens);
    if (config.cache.num_blocks < needed) {
      return invalid_argument("the KV cache budget of " + std::to_string(budget) + " bytes holds " +
                              std::to_string(config.cache.num_blocks) + " blocks of " +
                              std::to_string(config.cache.block_size) + " tokens, fewer than the " +
                              std::to_string(needed) + " one max_model_len " +
                              std::to_string(sched.max_model_len) +
                              " request needs (a block takes " +
                              std::to_string(kv_page_bytes(info, per_block, limits.single_group)) +
                              " bytes); raise --kv-cache-memory or lower --max-model-len");
    }
  }
  PAGODA_RETURN_IF_ERROR(sched.validate(config.cache));
  return config;
}

}  // namespace pagoda::engine
