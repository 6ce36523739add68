// The engine-side state of one request, shared by the scheduler and the KV-cache manager (as
// nano-vllm's Sequence): tokens so far, how many of them have K/V in the cache, the block table
// holding that K/V, and the prefix-cache keys of its full blocks.
//
//   token_ids():  [ prompt ............ | output ..... ]
//                 |<-- num_computed_tokens -->|            K/V in the cache
//                 |<------------- num_tokens ------------>|
//
// The scheduler advances num_computed_tokens when it schedules tokens (the step that computes
// them runs before anything else looks), and appends a sampled token after the step.
//
// Overlapped steps: a step that samples for the request counts one sample in flight from its
// schedule() to its update_from_output(). While one is in flight, the next schedule() may run
// the token it will bring (a placeholder the executor fills in) if the request allows it:
//
//   token_ids():  [ prompt ......... | output .... ] [?]      ? = sampled by the step in flight
//                 |<------ num_computed_tokens ------->|       after scheduling ? as well
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/block_hash.h"
#include "engine/request_status.h"

namespace pagoda::engine {

/// What the client asked for that the scheduler acts on (stop strings live in output processing).
struct RequestOptions {
  /// Most tokens to generate; unset means up to max_model_len (resolved at admission).
  std::optional<std::int64_t> max_tokens;
  /// Stop tokens (EOS and stop_token_ids) are ignored until this many tokens are generated.
  std::int64_t min_tokens = 0;
  /// Keep generating past EOS (stop_token_ids still stop).
  bool ignore_eos = false;
  /// The model's end-of-sequence token, if it has one.
  std::optional<std::int32_t> eos_token_id;
  /// Extra token ids that finish the request with reason "stop".
  std::vector<std::int32_t> stop_token_ids;
  /// Smaller runs first under the priority policy (vLLM's convention).
  std::int32_t priority = 0;
  /// Seconds on the engine's clock; breaks priority ties and feeds queue-time metrics.
  double arrival_time = 0.0;
  /// Extra prefix-cache key: requests with different salts never share cached blocks.
  std::string cache_salt;
  /// Never start from cached blocks (its blocks are still cached for others): prompt logprobs
  /// need logits at every prompt position, which a prefix hit would skip (as vLLM does).
  bool skip_prefix_cache_hits = false;
  /// Prompt logprobs: every prompt token it runs adds a logits row, so the scheduler caps those
  /// tokens per step (Scheduler::kMaxScoredTokensPerStep) to bound the step's logits.
  bool scores_prompt = false;
};

/// One request inside the engine; owned by the Scheduler, lent to the KvCacheManager.
class Request {
 public:
  /// A waiting request with `prompt_token_ids` (validated by Scheduler::add_request).
  Request(std::string request_id, std::vector<std::int32_t> prompt_token_ids,
          RequestOptions options = {});

  /// The caller's id, unique among live requests.
  const std::string& request_id() const { return request_id_; }
  /// The dense index the engine gave it at admission (-1 outside an engine): where the runner,
  /// the executor's sampler and the engine keep its per-request state.
  std::int32_t slot() const { return slot_; }
  void set_slot(std::int32_t slot) { slot_ = slot; }
  /// Prompt then output tokens.
  std::span<const std::int32_t> token_ids() const { return token_ids_; }
  /// The prompt's tokens.
  std::span<const std::int32_t> prompt_token_ids() const {
    return std::span(token_ids_).first(num_prompt_tokens_);
  }
  /// The generated tokens.
  std::span<const std::int32_t> output_token_ids() const {
    return std::span(token_ids_).subspan(num_prompt_tokens_);
  }
  /// Prompt + output length.
  std::int64_t num_tokens() const { return static_cast<std::int64_t>(token_ids_.size()); }
  /// Prompt length.
  std::int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  /// Generated length.
  std::int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  /// Appends a sampled token.
  void append_output_token(std::int32_t token_id) { token_ids_.push_back(token_id); }

  /// Tokens a proposer drafted after the last token, to verify in the next step (speculative
  /// decoding); consumed when scheduled, dropped on preemption.
  const std::vector<std::int32_t>& spec_token_ids() const { return spec_token_ids_; }
  /// Set by the engine's speculator between steps; cleared by the scheduler.
  void set_spec_token_ids(std::vector<std::int32_t> ids) { spec_token_ids_ = std::move(ids); }

  /// Steps scheduled to sample for this request whose tokens have not been appended yet: 0
  /// between synchronous steps; up to 2 with overlapped steps.
  std::int64_t num_samples_in_flight() const { return num_samples_in_flight_; }
  void add_sample_in_flight() { ++num_samples_in_flight_; }
  /// A scheduled sample came back (or its step failed).
  void remove_sample_in_flight();
  /// Whether the scheduler may run the token still in flight (overlapped steps); false for a
  /// request whose next input the host must see first (a reasoning budget forces tokens).
  bool schedules_ahead() const { return schedules_ahead_; }
  void set_schedules_ahead(bool on) { schedules_ahead_ = on; }
  /// The last schedule() that gave it tokens (SchedulerOutput::step_id), 0 for none: its
  /// blocks may be freed only once that step is done.
  std::int64_t last_step_id() const { return last_step_id_; }
  void set_last_step_id(std::int64_t id) { last_step_id_ = id; }

  /// Tokens whose K/V is (or, during a step, is being) written to the cache; at most
  /// num_tokens() + num_samples_in_flight().
  std::int64_t num_computed_tokens() const { return num_computed_tokens_; }
  /// Set by the scheduler (advance on schedule, 0 on preemption) and the KV manager (prefix hit).
  void set_num_computed_tokens(std::int64_t n);

  /// The client's options; max_tokens is set once the request has been admitted.
  const RequestOptions& options() const { return options_; }
  /// Resolved generation cap.
  std::int64_t max_tokens() const { return options_.max_tokens.value_or(0); }
  /// Fixes max_tokens (an unset one becomes what fits in `max_model_len`).
  void resolve_max_tokens(std::int64_t max_model_len);

  /// Current state.
  RequestStatus status() const { return status_; }
  /// Moves the state machine; CHECKs that a terminal state is never left.
  void set_status(RequestStatus status);
  /// The token id that stopped the request (EOS or a stop token), if one did.
  std::optional<std::int32_t> stop_token_id() const { return stop_token_id_; }
  /// Records the token that stopped the request.
  void set_stop_token_id(std::int32_t token_id) { stop_token_id_ = token_id; }

  /// Order of arrival at the scheduler; breaks ties between equal arrival times.
  std::uint64_t arrival_seq() const { return arrival_seq_; }
  /// Set once by the scheduler.
  void set_arrival_seq(std::uint64_t seq) { arrival_seq_ = seq; }

  /// The KV blocks holding this request's tokens, in position order (its block table), of KV
  /// group `group` (kv_cache_manager.h): entry i holds positions [i * block_size, (i + 1) *
  /// block_size). A sliding-window group's entries below its window are -1 (freed or never held).
  const std::vector<std::int32_t>& block_ids(std::size_t group = 0) const {
    if (group == 0) return block_ids_;
    return group - 1 < group_block_ids_.size() ? group_block_ids_[group - 1] : kNoBlocks;
  }
  /// Only the KvCacheManager changes the block tables.
  std::vector<std::int32_t>& mutable_block_ids(std::size_t group = 0) {
    if (group == 0) return block_ids_;
    if (group > group_block_ids_.size()) group_block_ids_.resize(group);
    return group_block_ids_[group - 1];
  }
  /// Leading blocks of group `group` already registered in the prefix cache (or skipped: -1).
  std::int64_t num_cached_blocks(std::size_t group = 0) const {
    if (group == 0) return num_cached_blocks_;
    return group - 1 < group_num_cached_blocks_.size() ? group_num_cached_blocks_[group - 1] : 0;
  }
  /// Set by the KvCacheManager.
  void set_num_cached_blocks(std::int64_t n, std::size_t group = 0) {
    if (group == 0) {
      num_cached_blocks_ = n;
      return;
    }
    if (group > group_num_cached_blocks_.size()) group_num_cached_blocks_.resize(group, 0);
    group_num_cached_blocks_[group - 1] = n;
  }
  /// Prefix-cache keys of the full blocks of token_ids(), extended as tokens arrive.
  const std::vector<BlockHash>& block_hashes() const { return block_hashes_; }
  /// Only the KvCacheManager extends the keys.
  std::vector<BlockHash>& mutable_block_hashes() { return block_hashes_; }

  /// Prompt tokens served from the prefix cache at first admission (OpenAI usage.cached_tokens).
  std::int64_t num_cached_prompt_tokens() const { return num_cached_prompt_tokens_; }
  /// Set by the scheduler at first admission.
  void set_num_cached_prompt_tokens(std::int64_t n) { num_cached_prompt_tokens_ = n; }
  /// Times this request lost its blocks to preemption.
  std::int64_t num_preemptions() const { return num_preemptions_; }
  /// Counts one more preemption.
  void count_preemption() { ++num_preemptions_; }

 private:
  std::string request_id_;
  std::int32_t slot_ = -1;
  std::vector<std::int32_t> token_ids_;
  std::vector<std::int32_t> spec_token_ids_;
  std::int64_t num_prompt_tokens_ = 0;
  std::int64_t num_computed_tokens_ = 0;
  RequestOptions options_;
  RequestStatus status_ = RequestStatus::kWaiting;
  std::optional<std::int32_t> stop_token_id_;
  std::uint64_t arrival_seq_ = 0;
  static inline const std::vector<std::int32_t> kNoBlocks;
  // Group 0's table inline (the only one of most models), the other groups' beside it.
  std::vector<std::int32_t> block_ids_;
  std::int64_t num_cached_blocks_ = 0;
  std::vector<std::vector<std::int32_t>> group_block_ids_;  // groups 1..
  std::vector<std::int64_t> group_num_cached_blocks_;       // groups 1..
  std::vector<BlockHash> block_hashes_;
  std::int64_t num_cached_prompt_tokens_ = 0;
  std::int64_t num_preemptions_ = 0;
  std::int64_t num_samples_in_flight_ = 0;
  bool schedules_ahead_ = false;
  std::int64_t last_step_id_ = 0;
};

}  // namespace pagoda::engine
