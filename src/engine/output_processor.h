// Output processing: the last stage of an engine step, and the only place that turns token ids
// into what a client sees (DESIGN.md section 2). Requests are known by their slot
// (slot_allocator.h); the engine loop drives it:
//
//   admission:                                outputs.add_request(slot, id, ...);
//   sched   = scheduler.schedule();           outputs.record_scheduled(sched, now);
//   ...                                       updates = scheduler.update_from_output(...);
//   result  = outputs.process(updates, now);  for slot in result.requests_to_abort:
//                                               scheduler.abort_request(id at slot);
//                                             deliver result.outputs to their channels;
//   on client cancel:                         scheduler.abort_request(id);
//                                             deliver outputs.abort(slot);
//   after a final output is delivered:        outputs.release(slot)   (EngineCore::release_slot)
//
// A request's state lives from add_request() to release(); after its final output it is
// finished (no more updates, abort() answers nullopt) but keeps its slot until released, so the
// slot's next request always starts from a fresh state.
//
// A stop string is found in text, which the scheduler never sees, so the scheduler still runs
// the request; `requests_to_abort` tells the engine to end it there before the next schedule()
// (and before the final output releases the slot). The client already has the final output with
// finish_reason "stop"; the scheduler's kFinishedAborted for it is internal (it frees the
// blocks). This is how vLLM v1 does it.
//
// Single-threaded, owned by the engine loop, like the scheduler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/output_options.h"
#include "engine/request_output.h"
#include "engine/request_output_state.h"
#include "engine/request_update.h"
#include "engine/scheduler_output.h"
#include "engine/token_logprobs.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda::engine {

/// Where a request with a reasoning parser stands after a step (budgets and traces use it).
struct ReasoningProgress {
  std::int32_t slot = -1;  ///< The request's slot.
  bool inside = false;     ///< The span is open now.
  bool opened = false;     ///< It opened during this step.
  bool closed = false;     ///< It closed during this step.
  std::int64_t num_reasoning_tokens = 0;
  std::int64_t num_output_tokens = 0;
};

/// What one step produced for the clients.
struct ProcessedOutputs {
  /// Outputs to deliver, in update order.
  std::vector<RequestOutput> outputs;
  std::vector<std::int32_t> output_slots;  ///< Their requests' slots, aligned.
  /// One entry per updated request that has a reasoning parser, in update order.
  std::vector<ReasoningProgress> reasoning;
  /// Slots of requests a stop string finished that the scheduler still runs: abort them there.
  std::vector<std::int32_t> requests_to_abort;
};

/// Per-request detokenization, stop strings, finish reasons, usage and timings.
class OutputProcessor {
 public:
  /// `tokenizer` must outlive the processor.
  explicit OutputProcessor(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  /// Registers request `request_id` at `slot` (never used, or released since) before the
  /// scheduler sees it. INVALID_ARGUMENT for options that fail OutputOptions::validate().
  Status add_request(std::int32_t slot, std::string request_id, OutputOptions options,
                     std::int64_t num_prompt_tokens, double arrival_time);

  /// Records the first scheduling of each request in `output` (queue time).
  void record_scheduled(const SchedulerOutput& output, double now);

  /// Applies one step's updates, found by RequestUpdate::slot. `logprobs` is empty or aligned
  /// with `updates`: logprobs[i] covers updates[i].new_token_ids, needed for requests that asked
  /// for logprobs. Every update must name a live request.
  ProcessedOutputs process(std::span<const RequestUpdate> updates, double now,
                           std::span<const std::vector<TokenLogprobs>> logprobs = {});

  /// Final output (finish_reason "abort") of the live request at `slot`; nullopt when the slot
  /// holds none or its request already had its final output, so a late cancel is harmless.
  std::optional<RequestOutput> abort(std::int32_t slot, double now);

  /// Forgets the request at `slot`, finished or not; no-op for a free slot.
  void release(std::int32_t slot);

  /// Whether the request at `slot` is live: added, and without its final output yet.
  bool has_request(std::int32_t slot) const;
  /// Live requests.
  std::size_t num_requests() const { return num_live_; }

 private:
  // The state at `slot`, or nullptr.
  RequestOutputState* find(std::int32_t slot);
  const RequestOutputState* find(std::int32_t slot) const;

  const Tokenizer& tokenizer_;
  std::vector<std::optional<RequestOutputState>> states_;  // by slot, grown on demand
  std::size_t num_live_ = 0;
};

}  // namespace pagoda::engine
