// What one step runs (scheduler -> model runner) and what comes back (sampler -> scheduler).
// Only token ids and block ids: the runner turns them into positions, slot mapping and block
// tables (pagoda/forward_batch.h). Block tables travel as diffs, as in vLLM v1:
//
//   step 1  A new        block_ids = [4, 9]      whole table (prompt of 20 tokens, block_size 16)
//   step 2  A running    block_ids = []          decode fits in block 9
//   ...
//   step 14 A running    block_ids = [7]         position 32 opens a third block
//   step 15 A preempted  (listed in preempted_slots; the runner drops A's table)
//   step 18 A new again  block_ids = [2, 5, 11]  resumed: whole table, is_new and resumed set
//
// The runner keeps each request's table between steps: table = block_ids when is_new, else
// table += block_ids. Token row t of a scheduled request sits at position
// num_computed_tokens + t, in slot table[pos / block_size] * block_size + pos % block_size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::engine {

/// One request's share of a step.
struct ScheduledRequest {
  std::string request_id;
  /// The request's dense slot (Request::slot): the runner's and the executor's per-request state.
  std::int32_t slot = -1;
  /// First step in the runner's batch since admission or resumption: block_ids is the whole
  /// table. Otherwise block_ids holds only the blocks appended this step (usually none).
  bool is_new = false;
  /// Set with is_new when the request was preempted before; its prompt for recompute is
  /// prompt + output so far, all of it in token_ids over the coming steps.
  bool resumed_from_preemption = false;
  /// Tokens already in the cache before this step: the position of token_ids[0].
  std::int64_t num_computed_tokens = 0;
  /// The tokens to run, [num_scheduled_tokens], positions num_computed_tokens onward; the last
  /// num_spec_tokens of them are drafts to verify.
  std::vector<std::int32_t> token_ids;
  /// Drafted tokens at the end of token_ids (speculative decoding). The last 1 + num_spec_tokens
  /// rows all return logits: row j scores the token after draft j - 1.
  std::int64_t num_spec_tokens = 0;
  /// Whole table (is_new) or appended blocks, in position order.
  std::vector<std::int32_t> block_ids;
  /// KV groups 1.. of a model with sliding-window layers (kv_cache_manager.h): each group's
  /// whole table (is_new; -1 below a prefix hit's window) or its appended blocks, as block_ids
  /// (the tables grow in step: as many entries as block_ids). The blocks a window leaves are
  /// not reported: the runner marks them -1 from the window rule itself.
  std::vector<std::vector<std::int32_t>> group_block_ids;
  /// This step reaches the request's last token, so the last row's logits are sampled.
  /// False for a prefill chunk that stops short of the end of the prompt.
  bool needs_sample = false;
  /// Overlapped steps: the last of token_ids is the token the step in flight samples for this
  /// request (ForwardBatch::kTokenInFlight here; the executor fills it in).
  bool last_token_in_flight = false;
  /// Output index of the first token this step samples: the draw's position.
  std::int64_t output_index = 0;

  /// Tokens scheduled this step.
  std::int64_t num_scheduled_tokens() const { return static_cast<std::int64_t>(token_ids.size()); }
};

/// The whole step.
struct SchedulerOutput {
  /// 1, 2, ... in schedule() order (Scheduler::step_done).
  std::int64_t step_id = 0;
  /// Running requests first (policy order), then newly admitted ones.
  std::vector<ScheduledRequest> requests;
  /// Sum of num_scheduled_tokens(); at most max_num_batched_tokens.
  std::int64_t total_num_scheduled_tokens = 0;
  /// Preempted in this step: the runner drops their state (their blocks are gone).
  std::vector<std::string> preempted_request_ids;
  std::vector<std::int32_t> preempted_slots;  ///< Their slots, aligned.
  /// Finished or aborted since the previous step while in the runner's batch: drop their state.
  std::vector<std::string> finished_request_ids;
  std::vector<std::int32_t> finished_slots;  ///< Their slots, aligned.

  /// Whether nothing runs this step.
  bool empty() const { return requests.empty(); }
};

/// The sampler's answer to a SchedulerOutput, aligned with it: token_ids[i] are the tokens
/// sampled for requests[i] (one for a decode; for a request with drafts, the accepted drafts
/// then one more token; none when needs_sample was false, and anything given then is ignored).
struct SampledTokens {
  std::vector<std::vector<std::int32_t>> token_ids;
};

}  // namespace pagoda::engine
