// Turns the scheduler's decisions (token ids and block-id diffs) into one ForwardBatch and one
// SamplingBatch per step and runs them on a ModelExecutor, which samples beside the logits. It
// keeps each request's block table between steps, by slot, since the scheduler sends a table in
// full only once (admission or resumption) and diffs afterwards:
//
//   step output for A        runner's table for A
//   is_new, [4, 9]           [4, 9]
//   running, []              [4, 9]
//   running, [7]             [4, 9, 7]
//   preempted / finished     (dropped)
//
// A step is prepare() (state changes, the batch, one default SamplingRow per logits row), the
// caller filling rows_for(i), then run(), or launch() and later collect() for overlapped steps.
// A row whose input token is still in flight takes it from the previous launched step's row of
// the same request (ForwardBatch::from_previous_step), which the runner remembers by slot:
//
//   step N     rows A B C       sampling rows  A:0  B:1  C:2
//   step N+1   rows B' A'       from_previous_step {0, 1} {1, 0}   (B' <- B's sample, A' <- A's)
//
// The vectors keep their capacity, so a steady decode allocates nothing per step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler_output.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda::engine {

/// The persistent batch: per-slot block tables, and the step's tensors in the executor's words.
class ModelRunner {
 public:
  /// Drives `executor` (which must outlive the runner) with blocks of `block_size` tokens.
  /// `sliding_windows`: the windows of KV groups 1.. (CacheConfig::sliding_windows), whose tables
  /// go to ForwardBatch::kv_groups; empty for one table.
  ModelRunner(ModelExecutor& executor, std::int64_t block_size,
              std::vector<std::int64_t> sliding_windows = {});

  /// Applies `output`'s state changes (drops finished and preempted requests, takes new tables,
  /// appends new blocks) and builds the step's batch and its sampling rows, each with the
  /// request's slot and otherwise default (greedy).
  void prepare(const SchedulerOutput& output);
  /// The sampling rows of output.requests[i] from the last prepare(): 1 + num_spec_tokens rows
  /// (one without drafts), empty when that request does not sample this step.
  std::span<SamplingRow> rows_for(std::size_t i);
  /// Runs the prepared step. An executor error comes back as is; the caller then aborts the
  /// scheduled requests, whose state goes with the next step's finished_slots.
  Status run();
  /// Overlapped steps: launches the prepared step (nothing when it has no tokens) without
  /// waiting; false in *launched when there was nothing to launch.
  Status launch(bool* launched);
  /// Waits for the oldest launched step's output.
  Status collect(StepOutput& out) { return executor_.collect_step(out); }

  /// What the last run() sampled; request i's rows start at first_row(i).
  const StepOutput& step_output() const { return step_output_; }
  /// Index of output.requests[i]'s first row in step_output(), or -1.
  std::int32_t first_row(std::size_t i) const { return first_row_[i]; }
  /// first_row(i) for every i of the last prepare().
  const std::vector<std::int32_t>& first_rows() const { return first_row_; }

  /// Prompt logprobs: `slot`'s request wants the logprobs of each prompt token after the first,
  /// with `num_logprobs` alternatives. Every prefill row whose next token is a prompt token then
  /// gets a logits row (a SamplingRow with prompt_row set) until the whole prompt is scored;
  /// positions re-run after a preemption are not scored twice. Lasts until
  /// clear_prompt_scoring(slot), which the engine calls when it releases the slot.
  void score_prompt(std::int32_t slot, std::vector<std::int32_t> prompt_token_ids,
                    std::int32_t num_logprobs);
  void clear_prompt_scoring(std::int32_t slot);
  /// One request's prompt-scoring rows in the last prepare(): rows [first_row, first_row +
  /// num_rows) of the step output score prompt tokens first_token, first_token + 1, ...
  struct PromptRows {
    std::size_t request = 0;  // index in output.requests
    std::int32_t slot = -1;
    std::int32_t first_row = 0;
    std::int32_t num_rows = 0;
    std::int64_t first_token = 0;
  };
  const std::vector<PromptRows>& prompt_rows() const { return prompt_rows_; }

  /// The batch the last prepare() built (for tests and tracing).
  const ForwardBatch& batch() const { return batch_; }
  const SamplingBatch& sampling() const { return sampling_; }
  /// The step's sampling batch, whose allowed-token masks the caller adds after prepare()
  /// (SamplingRow::allowed_mask indexes them; SamplingBatch::pending_masks while being filled).
  SamplingBatch& mutable_sampling() { return sampling_; }
  /// Requests whose state the runner holds.
  std::size_t num_requests() const { return num_live_; }
  /// The block table the runner holds for a slot, or nullptr.
  const std::vector<std::int32_t>* block_table(std::int32_t slot) const;

 private:
  struct RequestState {
    bool live = false;
    std::vector<std::int32_t> block_table;
    std::vector<std::vector<std::int32_t>> group_tables;  // KV groups 1..
    // Tokens with K/V in the cache after the last step that ran this request, not counting its
    // drafts; a running request's next step starts there plus however many drafts were
    // accepted (0..num_spec_tokens).
    std::int64_t num_computed_tokens = 0;
    std::int64_t num_spec_tokens = 0;
    // Its sampling row in the last step that sampled for it, or -1 (overlapped steps).
    std::int32_t last_sample_row = -1;
    std::int64_t last_sample_batch = 0;  // which batch that row is in (num_batches_ numbering)
  };

  RequestState& state(std::int32_t slot);
  void drop(std::int32_t slot);
  void update_states(const SchedulerOutput& output);
  void prepare_batch(const SchedulerOutput& output);
  void add_prompt_rows(std::size_t i, const ScheduledRequest& s, std::int64_t first_token_row);
  void add_group_tables(const RequestState& state, std::int64_t start, std::int64_t num_tokens,
                        std::int64_t max_blocks);

  ModelExecutor& executor_;
  std::int64_t block_size_;
  std::vector<std::int64_t> sliding_windows_;  // of KV groups 1..
  std::vector<RequestState> states_;           // by slot
  // Prompt logprobs by slot: the prompt, how many alternatives, and the next prompt index to
  // score (1 .. size; size: done).
  struct PromptScoring {
    std::vector<std::int32_t> prompt;
    std::int32_t num_logprobs = -1;
    std::int64_t next_token = 1;
  };
  std::vector<PromptScoring> scoring_;  // by slot
  std::vector<PromptRows> prompt_rows_;
  std::size_t num_live_ = 0;
  std::int64_t num_batches_ = 0;  // non-empty batches prepared: each is launched or run
  ForwardBatch batch_;
  SamplingBatch sampling_;
  StepOutput step_output_;
  std::vector<std::int32_t> first_row_;  // [num_scheduled], first sampling row or -1
  std::vector<std::int32_t> num_rows_;   // [num_scheduled]
};

}  // namespace pagoda::engine
