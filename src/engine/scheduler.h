// Continuous batching with vLLM v1's rule: no prefill or decode phase, only requests whose
// num_computed_tokens catches up with num_tokens inside a per-step token budget. One step:
//
//   1. running requests, in policy order: each gets min(num_tokens - num_computed_tokens,
//      budget left) tokens, so long prompts are prefilled in chunks beside decodes. A request
//      that cannot get blocks preempts the last running request (lowest priority, newest) and
//      retries; if it is the last itself, it is preempted and the pass ends.
//   2. waiting requests, in policy order, only if nothing was preempted: each starts from its
//      prefix-cache hit and is admitted only if its blocks can be allocated now (no overtaking:
//      the first that does not fit stops admission).
//
// Speculative decoding rides on the same rule. A decoding request may carry k drafts
// (Request::spec_token_ids); they are scheduled behind its last token when the budget and free
// blocks allow (never at the cost of a preemption), and verified in the same pass. Say n tokens
// are known, n - 1 computed, drafts d1 d2 d3:
//
//   schedule         run  t[n-1] d1 d2 d3 at positions n-1 .. n+2; slots for n+3 tokens
//                    num_computed_tokens = n (the drafts are not counted yet)
//   verify           d1 accepted, d2 rejected -> appended d1 x (x: the replacement)
//   update           num_computed_tokens = num_tokens - 1 = n + 1: K/V of t[n-1] and d1 count,
//                    the slots of d2 d3 are overwritten later; their blocks stay in the table
//                    (reused by the next steps, freed with the request) and are keyed for the
//                    prefix cache only once real tokens fill them.
//
// Overlapped steps (--async-scheduling) ride on it too. While step N is in flight, its sampled
// token is not known; schedule() for N+1 may still run it, as a placeholder the executor fills
// from N's samples (Request::num_samples_in_flight, ScheduledRequest::last_token_in_flight):
//
//   schedule N    A: t[n-1] at n-1         A has a sample in flight; num_computed = n
//   schedule N+1  A: ? at n                placeholder; num_computed = n + 1, 2 in flight
//   update N      A: append t[n]           1 in flight
//   update N+1    A: append t[n+1]         or dropped, if t[n] finished A
//
// A request is not run past its known end (max_tokens, max_model_len). One that finishes while
// a later step in flight still names it keeps its blocks until that step is done (step_done):
// the device may still write them. A preempted request loses its blocks at once, so the engine
// waits for the step in flight before it launches a step that preempted (the blocks may move).
//
// Owned by the engine loop: single-threaded, no exceptions. The named pieces live apart:
// admission/preemption order (scheduling_policy.h, request_queue.h), budget (token_budget.h),
// finish rules (stop_checker.h), blocks (kv_cache_manager.h).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/string_map.h"
#include "engine/kv_cache_manager.h"
#include "engine/request.h"
#include "engine/request_queue.h"
#include "engine/request_update.h"
#include "engine/scheduler_config.h"
#include "engine/scheduler_output.h"
#include "engine/token_budget.h"

namespace pagoda::engine {

/// Gauges and counters for /metrics.
struct SchedulerStats {
  std::int64_t num_running = 0;
  std::int64_t num_waiting = 0;
  double kv_cache_usage = 0.0;       ///< Used fraction of the block pool.
  std::int64_t num_preemptions = 0;  ///< Since construction.
  PrefixCacheStats prefix_cache;
  /// Tokens scheduled since construction, split by what they were: a request's last known token
  /// and its drafts (a decode row), or tokens before it (a prompt chunk, or a preempted
  /// request's recompute). Per engine step they show how the step's budget was shared.
  std::int64_t num_scheduled_decode_tokens = 0;
  std::int64_t num_scheduled_prefill_tokens = 0;
};

/// Decides what runs each step and applies what was sampled.
class Scheduler {
 public:
  /// Both configs must validate (SchedulerConfig::validate; CHECKed).
  Scheduler(const SchedulerConfig& config, const CacheConfig& cache_config);

  /// Queues a request. INVALID_ARGUMENT, with the limits in the message, for an empty or
  /// negative-token prompt, a reused id, bad max_tokens/min_tokens, or prompt + max_tokens over
  /// max_model_len.
  Status add_request(std::unique_ptr<Request> request);

  /// Plans one step and advances num_computed_tokens of every scheduled request.
  SchedulerOutput schedule();
  /// The token budget of the next steps, below the --max-num-batched-tokens cap (the engine's
  /// step-time target, step_time_budget.h); the running requests' decodes plus
  /// kMinPrefillChunk tokens are always allowed.
  void set_step_token_budget(std::int64_t tokens) { step_token_budget_ = tokens; }
  static constexpr std::int64_t kMinPrefillChunk = 16;

  /// Appends the sampled tokens of the step `output` planned, finishes requests that stop
  /// (freeing their blocks once no step in flight names them) and reports every request that
  /// got tokens. Steps are updated in the order they were scheduled; update marks it done.
  std::vector<RequestUpdate> update_from_output(const SchedulerOutput& output,
                                                const SampledTokens& sampled);

  /// The step `step_id` (and every earlier one) is over: ended requests it named give their
  /// blocks back. update_from_output calls it; the engine calls it for a failed step.
  void step_done(std::int64_t step_id);

  /// The step_id of the latest schedule().
  std::int64_t last_step_id() const { return last_step_id_; }

  /// Sets the drafts `request_id` carries into the next schedule() (speculative decoding); false
  /// when the id is unknown. Only a running request with exactly one token to compute uses them.
  bool set_spec_token_ids(std::string_view request_id, std::vector<std::int32_t> token_ids);

  /// Ends a request in any state and frees its blocks now; false when the id is unknown.
  /// Call between steps (after update_from_output), as the engine loop does.
  bool abort_request(std::string_view request_id);

  /// Forgets every prefix-cache key; false (and nothing changes) while any block is in use.
  /// The engine calls it after a failed step, whose blocks were keyed but maybe never written.
  bool reset_prefix_cache() { return kv_.reset_prefix_cache(); }

  /// Whether any request is waiting or running.
  bool has_unfinished_requests() const { return !requests_.empty(); }
  /// Requests in the running batch (decoding or mid-prompt).
  std::int64_t num_running() const { return static_cast<std::int64_t>(running_.size()); }
  /// A live request, or nullptr.
  const Request* find_request(std::string_view request_id) const;
  /// Running requests in policy order.
  const RequestQueue& running() const { return running_; }
  /// Waiting (and preempted) requests in admission order.
  const RequestQueue& waiting() const { return waiting_; }
  /// Current gauges and counters.
  SchedulerStats stats() const;
  /// The KV-cache manager (stats and invariant checks).
  const KvCacheManager& kv_cache_manager() const { return kv_; }
  /// The configuration in force.
  const SchedulerConfig& config() const { return config_; }

  /// Most prompt tokens of scoring requests (RequestOptions::scores_prompt) one step runs: each
  /// adds a logits row, and the CPU executor holds a step's rows as fp32 at once (256 x 49,152
  /// vocab = 48 MiB; the CUDA executor's LM-head chunk is also 256 rows).
  static constexpr std::int64_t kMaxScoredTokensPerStep = 256;

 private:
  using RequestMap = StringMap<std::unique_ptr<Request>>;
  // Caps `num_new` tokens of `request` by the scored-token room left in this step, and spends it.
  std::int64_t take_scored(const Request& request, std::int64_t num_new);

  Status validate_request(const Request& request) const;
  bool schedule_running(TokenBudget& budget, SchedulerOutput& out);
  void schedule_waiting(TokenBudget& budget, SchedulerOutput& out);
  void add_scheduled(Request& request, std::int64_t num_tokens, std::vector<std::int32_t> blocks,
                     bool is_new, SchedulerOutput& out, std::int64_t num_spec_tokens = 0);
  void preempt_last_running(SchedulerOutput& out);
  // Ends the request and drops it from requests_ (into retiring_ while a step in flight names it).
  void finish(RequestMap::iterator it, RequestStatus status);
  // Tokens in flight schedule() may run after the known ones; -1 when it must wait for them.
  std::int64_t tokens_ahead(const Request& request) const;

  SchedulerConfig config_;
  KvCacheManager kv_;
  // By client id, not slot: the scheduler is where a reused id is refused and where aborts,
  // which name ids, find their request. Per-request state elsewhere is kept by slot.
  RequestMap requests_;
  RequestQueue waiting_;
  RequestQueue running_;
  // Requests the runner holds state for that ended since the last schedule().
  std::vector<std::string> finished_in_batch_;
  std::vector<std::int32_t> finished_slots_in_batch_;
  // Ended requests whose blocks a step in flight may still write; freed by step_done.
  std::int64_t step_token_budget_ = std::numeric_limits<std::int64_t>::max();
  std::vector<std::unique_ptr<Request>> retiring_;
  std::int64_t last_step_id_ = 0;       // of the latest schedule()
  std::int64_t last_done_step_id_ = 0;  // steps up to it are over
  std::uint64_t next_arrival_seq_ = 0;
  std::int64_t num_preemptions_ = 0;
  std::int64_t num_scheduled_decode_tokens_ = 0;
  std::int64_t num_scheduled_prefill_tokens_ = 0;
  std::int64_t scored_tokens_left_ = 0;  // in the schedule() under way
};

}  // namespace pagoda::engine
