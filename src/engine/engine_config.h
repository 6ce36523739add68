// Settings of the engine as a whole (scheduler, cache, queues, channels) and how the KV pool is
// sized from a memory budget.
//
// KV pool size, in blocks of block_size tokens (bytes per block from the executor: K and V of
// every layer):
//   --kv-cache-memory B given   B bytes
//   otherwise                   enough for max_num_seqs sequences of max_model_len tokens, capped
//                               at min(4 GiB, a quarter of physical memory) so a CPU host keeps
//                               room for weights, activations and everything else it runs
// split into blocks by kv_cache_sizing.h: floor(B / bytes_per_block) for one KV group; with
// sliding-window layers, sliding pools sized for the windows and the rest to the full layers.
// Either way group 0's pool must hold one max_model_len sequence (SchedulerConfig::validate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/cache_config.h"
#include "engine/reasoning_tags.h"
#include "engine/scheduler_config.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"
#include "spec/speculative_config.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {

/// Everything the engine needs besides the model.
struct EngineConfig {
  /// Token budget, sequence limits, policy. max_model_len 0 takes the executor's.
  SchedulerConfig scheduler{.max_model_len = 0};
  /// Block size and prefix caching; num_blocks 0 is derived from the memory budget.
  CacheConfig cache;
  /// Bytes for the KV pool (--kv-cache-memory); unset uses the default rule above.
  std::optional<std::int64_t> kv_cache_memory_bytes;
  /// One block table for every layer even for a model with sliding-window layers (vLLM's
  /// --disable-hybrid-kv-cache-manager): each sliding layer then keeps every token's K/V.
  bool disable_hybrid_kv_cache_manager = false;
  /// Accepted requests not yet admitted beyond max_num_seqs; submit() says RESOURCE_EXHAUSTED
  /// past it (--max-waiting-requests).
  std::int64_t max_waiting_requests = 1024;
  /// Outputs a request's channel holds before new deltas are merged into the last one.
  std::size_t output_channel_capacity = 64;
  /// The model's end-of-sequence token; extra EOS ids (generation_config) stop like it.
  std::optional<std::int32_t> eos_token_id;
  std::vector<std::int32_t> extra_eos_token_ids;

  /// Reasoning traces: where events go (null: tracing off, every hook is one branch).
  std::shared_ptr<trace::TraceSink> trace_sink;
  /// Fraction of requests traced besides those that ask (--trace-sample-rate), in [0, 1].
  double trace_sample_rate = 0.0;
  /// Alternatives captured per traced token (--trace-top-n), in [0, kMaxLogprobs].
  std::int64_t trace_top_n = 5;

  /// The thinking span's tags (--reasoning-parser); unset: the model does not think, all
  /// output is text and max_reasoning_tokens is refused.
  std::optional<ReasoningTags> reasoning;
  /// What reasoning_effort low / medium / high mean, in tokens.
  ReasoningEffortBudgets reasoning_effort_budgets;

  /// Seeds the draws of requests that bring no seed (--seed): each gets its own seed from this
  /// and its order of arrival. Unset: a random server seed.
  std::optional<std::uint64_t> seed;

  /// Overlapped steps (--async-scheduling): the host plans and launches step N+1 before it
  /// collects step N (engine_core.h). Ignored with speculative decoding, which needs each
  /// step's tokens on the host before the next is planned.
  bool async_scheduling = false;

  /// Step-time target in seconds (--step-time-target-ms; the CLI's default on the CPU 250 ms,
  /// 0 on CUDA): each step's token budget follows the measured cost of a token on this machine
  /// (step_time_budget.h), so long prompts prefill in chunks that keep a step near the target
  /// and no request waits seconds behind another's prefill. 0: the budget is
  /// --max-num-batched-tokens. Synchronous steps only.
  double step_time_target_seconds = 0.0;

  /// Speculative decoding (--speculative-config); unset: off.
  std::optional<spec::SpeculativeConfig> speculative;
  /// The draft model's executor when speculative->method is draft_model (its KV cache gets as
  /// many blocks as the target's).
  std::shared_ptr<ModelExecutor> draft_executor;

  /// Upper bound of the default KV budget.
  static constexpr std::int64_t kDefaultKvCacheBytesCap = std::int64_t{4} << 30;
};

/// Fills in the derived fields (max_model_len, num_blocks) for `executor` and validates them.
/// INVALID_ARGUMENT naming the flag when the budget cannot hold one max_model_len sequence or a
/// limit exceeds what the executor supports.
StatusOr<EngineConfig> resolve_engine_config(EngineConfig config, const ModelExecutor& executor);

}  // namespace pagoda::engine
