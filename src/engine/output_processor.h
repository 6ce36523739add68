// Output processing: the last stage of an engine step, and the only place that turns token ids
// into what a client sees (DESIGN.md section 2). The engine loop drives it:
//
//   sched   = scheduler.schedule();           outputs.record_scheduled(sched, now);
//   ...                                       updates = scheduler.update_from_output(...);
//   result  = outputs.process(updates, now);  deliver result.outputs to their channels;
//   for id in result.requests_to_abort:       scheduler.abort_request(id);
//   on client cancel:                         scheduler.abort_request(id); deliver
//   outputs.abort(id)
//
// A stop string is found in text, which the scheduler never sees, so the scheduler still runs
// the request; `requests_to_abort` tells the engine to end it there before the next schedule().
// The client already has the final output with finish_reason "stop"; the scheduler's
// kFinishedAborted for it is internal (it frees the blocks). This is how vLLM v1 does it.
//
// Single-threaded, owned by the engine loop, like the scheduler.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/string_map.h"
#include "engine/output_options.h"
#include "engine/request_output.h"
#include "engine/request_output_state.h"
#include "engine/request_update.h"
#include "engine/scheduler_output.h"
#include "engine/token_logprobs.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda::engine {

/// What one step produced for the clients.
/// Where a request with a reasoning parser stands after a step (budgets and traces use it).
struct ReasoningProgress {
  std::string request_id;
  bool inside = false;  ///< The span is open now.
  bool opened = false;  ///< It opened during this step.
  bool closed = false;  ///< It closed during this step.
  std::int64_t num_reasoning_tokens = 0;
  std::int64_t num_output_tokens = 0;
};

struct ProcessedOutputs {
  /// Outputs to deliver, in update order.
  std::vector<RequestOutput> outputs;
  /// One entry per updated request that has a reasoning parser, in update order.
  std::vector<ReasoningProgress> reasoning;
  /// Requests a stop string finished that the scheduler still runs: abort them there.
  std::vector<std::string> requests_to_abort;
};

/// Per-request detokenization, stop strings, finish reasons, usage and timings.
class OutputProcessor {
 public:
  /// `tokenizer` must outlive the processor.
  explicit OutputProcessor(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  /// Registers a request (before the scheduler sees it). INVALID_ARGUMENT for a reused id or
  /// options that fail OutputOptions::validate().
  Status add_request(std::string request_id, OutputOptions options, std::int64_t num_prompt_tokens,
                     double arrival_time);

  /// Records the first scheduling of each request in `output` (queue time).
  void record_scheduled(const SchedulerOutput& output, double now);

  /// Applies one step's updates. `logprobs` is empty or aligned with `updates`: logprobs[i]
  /// covers updates[i].new_token_ids, needed for requests that asked for logprobs. Finished
  /// requests are forgotten; every update must name a live request.
  ProcessedOutputs process(std::span<const RequestUpdate> updates, double now,
                           std::span<const std::vector<TokenLogprobs>> logprobs = {});

  /// Final output (finish_reason "abort") of a live request; nullopt when the id is unknown or
  /// the request already had its final output, so a late cancel is harmless.
  std::optional<RequestOutput> abort(std::string_view request_id, double now);

  /// Whether `request_id` is live here.
  bool has_request(std::string_view request_id) const {
    return states_.find(request_id) != states_.end();
  }
  /// Live requests.
  std::size_t num_requests() const { return states_.size(); }

 private:
  using StateMap = StringMap<RequestOutputState>;

  const Tokenizer& tokenizer_;
  StateMap states_;
};

}  // namespace pagoda::engine
