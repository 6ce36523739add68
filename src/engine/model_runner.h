// Turns the scheduler's decisions (token ids and block-id diffs) into one ForwardBatch per step
// and runs it on a ModelExecutor. It keeps each request's block table between steps, since the
// scheduler sends a table in full only once (admission or resumption) and diffs afterwards:
//
//   step output for A        runner's table for A
//   is_new, [4, 9]           [4, 9]
//   running, []              [4, 9]
//   running, [7]             [4, 9, 7]
//   preempted / finished     (dropped)
//
// The batch vectors and the logits buffer keep their capacity, so a steady decode allocates
// nothing per step.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/scheduler_output.h"
#include "pagoda/forward_batch.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"

namespace pagoda::engine {

/// The persistent batch: per-request block tables, and the step's tensors in the executor's words.
class ModelRunner {
 public:
  /// Drives `executor` (which must outlive the runner) with blocks of `block_size` tokens.
  ModelRunner(ModelExecutor& executor, std::int64_t block_size);

  /// Applies `output`'s state changes (drops finished and preempted requests, takes new tables,
  /// appends new blocks), builds the batch and runs it. An executor error comes back as is; the
  /// caller then aborts the scheduled requests, whose state goes with the next step's
  /// finished_request_ids.
  Status execute(const SchedulerOutput& output);

  /// The logits of output.requests[i] from the last execute(): [1 + num_spec_tokens, vocab]
  /// (one row without drafts); empty when that request did not need a sample.
  std::span<const float> logits_for(std::size_t i) const;

  /// The batch the last execute() ran (for tests and tracing).
  const ForwardBatch& batch() const { return batch_; }
  /// Requests whose state the runner holds.
  std::size_t num_requests() const { return states_.size(); }
  /// The block table the runner holds for a request, or nullptr.
  const std::vector<std::int32_t>* block_table(std::string_view request_id) const;

 private:
  struct RequestState {
    std::vector<std::int32_t> block_table;
    // Tokens with K/V in the cache after the last step that ran this request, not counting its
    // drafts; a running request's next step starts there plus however many drafts were
    // accepted (0..num_spec_tokens).
    std::int64_t num_computed_tokens = 0;
    std::int64_t num_spec_tokens = 0;
  };
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void update_states(const SchedulerOutput& output);
  void prepare_batch(const SchedulerOutput& output);

  ModelExecutor& executor_;
  std::int64_t block_size_;
  std::int64_t vocab_size_;
  std::unordered_map<std::string, RequestState, StringHash, std::equal_to<>> states_;
  ForwardBatch batch_;
  std::vector<float> logits_;              // [num_logits, vocab]
  std::vector<std::int32_t> logits_row_;   // [num_scheduled], first row in logits_ or -1
  std::vector<std::int32_t> logits_rows_;  // [num_scheduled], rows from logits_row_
};

}  // namespace pagoda::engine
