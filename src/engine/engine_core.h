// The engine loop: one thread that owns the scheduler, the model runner and output processing,
// and runs steps while there is work:
//
//   clients --add/abort--> command queue --> [ step: propose, schedule, execute, update, emit ]
//                                                                     |
//                                                 per-request OutputChannel <--+
//
// execute() runs the forward pass and samples beside the logits (the executor's sampler), so the
// engine sees token ids and asked-for logprobs only. Each live request has a dense slot from
// admission to its end: the scheduler carries it, and the runner, the executor's sampler, the
// output processor, the tracer, the speculator and the engine keep per-request state in
// per-slot arrays; release_slot() is the one place a request's state is dropped, everywhere at
// once, after its final output (the runner's table goes when the next schedule reports the slot
// finished). Client ids map to slots once, in slot_of_ (aborts name ids).
// Nothing here throws across the loop: an executor error fails the step's requests with an error
// output and the loop goes on. With no work the thread sleeps on a condition variable.
//
// Overlapped steps (EngineConfig::async_scheduling): the step is launched on the executor, and
// the one before it collected and processed only then, so the device runs step N+1 while the
// host turns N's tokens into outputs and plans N+2 (ModelExecutor::launch_step has the
// timeline). A request that ends while a later launched step still names it keeps its slot
// (and the scheduler its blocks) until that step is collected; its row there is dropped.
// The synchronous loop stays the reference: speculative decoding runs only there, and a request
// with a reasoning budget is never scheduled ahead of its token in flight (the host decides its
// forced tokens from the text).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/string_map.h"
#include "engine/constraint_mask_filler.h"
#include "engine/engine_config.h"
#include "engine/model_runner.h"
#include "engine/output_channel.h"
#include "engine/output_options.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/request_constraint.h"
#include "engine/request_tracer.h"
#include "engine/scheduler.h"
#include "engine/slot_allocator.h"
#include "engine/speculator.h"
#include "engine/step_time_budget.h"
#include "pagoda/model_executor.h"
#include "pagoda/sampling_params.h"
#include "pagoda/step_sampling.h"
#include "pagoda/tokenizer.h"
#include "structured/compiled_constraint.h"

namespace pagoda::engine {

/// One request as the core receives it, already validated by the EngineClient.
struct EngineCoreRequest {
  std::string request_id;
  /// Sample index within its client request (n > 1), echoed in every StreamOutput.
  std::int64_t index = 0;
  std::vector<std::int32_t> prompt_token_ids;
  SamplingParams sampling;
  RequestOptions options;
  OutputOptions output;
  /// Where its outputs go; shared by the n samples of one client request.
  std::shared_ptr<OutputChannel> channel;
  /// Emit trace events for it (EngineConfig::trace_sink must be set).
  bool traced = false;
  /// Tokens inside the thinking span before the engine closes it; unset: no budget.
  std::optional<std::int64_t> max_reasoning_tokens;
  /// Structured output (EngineRequest::constraint); null: none.
  std::shared_ptr<const structured::CompiledConstraint> constraint;
};

/// Host time between steps that the device waits through: from a step's launch returning (its
/// output, in the synchronous loop) to the next launch, less the time blocked collecting a step.
/// In the synchronous loop that is device idle time; with overlapped steps it is what the
/// device's step must hide. Gaps across an idle engine are not counted.
struct HostGapStats {
  std::int64_t steps = 0;  ///< Gaps measured.
  double total_seconds = 0.0;
  double p50_seconds = 0.0;  ///< From a log-scale histogram (within 5%).
  double mean_seconds() const {
    return steps > 0 ? total_seconds / static_cast<double>(steps) : 0.0;
  }
};

/// Gauges and counters, copied out after every step.
struct EngineStats {
  std::int64_t num_running = 0;
  std::int64_t num_waiting = 0;
  double kv_cache_usage = 0.0;  ///< Used fraction of the KV pool.
  std::int64_t num_kv_blocks = 0;
  std::int64_t num_preemptions = 0;
  std::int64_t prefix_cache_queries = 0;  ///< Tokens looked up at admission.
  std::int64_t prefix_cache_hits = 0;     ///< Of those, tokens served from the cache.
  std::int64_t num_steps = 0;
  /// Tokens the steps carried, decode rows and prompt chunks (SchedulerStats).
  std::int64_t num_scheduled_decode_tokens = 0;
  std::int64_t num_scheduled_prefill_tokens = 0;
  std::int64_t num_failed_steps = 0;  ///< Steps whose forward pass returned an error.
  std::int64_t num_generated_tokens = 0;
  std::int64_t num_slots_in_use = 0;  ///< Slots held by live (or retiring) requests.
  // Reasoning traces (zeros without a trace sink).
  std::int64_t trace_events_written = 0;
  std::int64_t trace_events_dropped = 0;
  std::int64_t trace_bytes_written = 0;
  double trace_seconds = 0.0;  ///< Engine time spent producing trace data.
  bool running = false;        ///< The loop thread is alive.
  /// Speculative decoding (zeros when off).
  SpecDecodeStats spec_decode;
  /// The executor's device busy / idle time (zeros on the CPU).
  DeviceTimeStats device_time;
  /// Host time between steps (the engine's side of device idle).
  HostGapStats host_gap;
  /// Structured outputs: allowed-token masks filled, the filler's time on them (beside the
  /// forward passes), and the time steps waited for them before sampling.
  std::int64_t constraint_masks = 0;
  double constraint_mask_seconds = 0.0;
  double constraint_mask_wait_seconds = 0.0;
};

/// The loop thread and everything it owns.
class EngineCore {
 public:
  /// Allocates the KV pool for `config` (already resolved by resolve_engine_config) and starts
  /// the loop thread. `tokenizer` must outlive the core.
  static StatusOr<std::unique_ptr<EngineCore>> create(const EngineConfig& config,
                                                      std::unique_ptr<ModelExecutor> executor,
                                                      std::shared_ptr<const Tokenizer> tokenizer);
  /// Aborts what is left and joins the thread.
  ~EngineCore();

  /// Queues a request (thread-safe). Its outputs, and exactly one final output, reach its
  /// channel, even if the engine stops first.
  void add_request(EngineCoreRequest request);
  /// Queues an abort (thread-safe); unknown or finished ids are ignored.
  void abort_request(std::string request_id);
  /// Stops the loop (thread-safe, idempotent) and joins it. drain: finish every request first;
  /// otherwise abort them. Either way each gets its final output.
  void shutdown(bool drain);

  /// A copy of the latest stats (thread-safe).
  EngineStats stats() const;
  /// Seconds on the engine's monotonic clock (arrival times use it).
  double now() const;
  /// The configuration in force.
  const EngineConfig& config() const { return config_; }
  /// The executor's limits.
  const ModelExecutorInfo& model_info() const { return executor_->info(); }

 private:
  struct Command {
    enum class Kind { kAdd, kAbort } kind;
    EngineCoreRequest request;  // kAdd; request.request_id for kAbort
  };
  // A thinking budget: once spent inside an open span, the end tag's ids are forced.
  struct ReasoningBudget {
    std::int64_t max_tokens = 0;
    bool spent = false;
    std::deque<std::int32_t> forced;
  };
  // Everything the engine keeps for one live request, at its slot.
  struct LiveRequest {
    std::string request_id;  // empty: the slot is free
    std::int64_t index = 0;
    std::shared_ptr<OutputChannel> channel;
    // Its sampling settings; each step sets position and forced_token.
    SamplingRow row;
    std::optional<ReasoningBudget> budget;
    bool drafts = false;  // the speculator holds it
    // Prompt logprobs gathered so far (prompt tokens 1, 2, ...); they go with its first output.
    std::vector<TokenLogprobs> prompt_logprobs;
    // Structured output: its matcher; null when unconstrained.
    std::unique_ptr<RequestConstraint> constraint;
    // Why the constraint ended it (no token allowed, a token refused); set in a step, acted on
    // after the step's outputs.
    std::optional<Status> constraint_failure;
  };

  EngineCore(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
             std::shared_ptr<const Tokenizer> tokenizer);

  void run();
  bool wait_for_work();
  void apply(Command& command);
  void add(EngineCoreRequest& request);
  // Ends the live request at `slot` with its final output (finish_reason "abort"); `error` set
  // when the engine, not the client, ended it.
  void abort(std::int32_t slot, const Status& error);
  // abort() of every live request.
  void abort_all(const Status& error);

  // A step launched and not yet collected (overlapped steps).
  struct InFlightStep {
    SchedulerOutput scheduled;
    std::vector<std::int32_t> first_row;               // the runner's first_rows() for it
    std::vector<ModelRunner::PromptRows> prompt_rows;  // the runner's prompt_rows() for it
  };
  // A log-scale histogram of host gaps (HostGapStats): 5% wide buckets from 1 us.
  struct HostGapHistogram {
    static constexpr int kBuckets = 400;
    std::int64_t counts[kBuckets] = {};
    std::int64_t steps = 0;
    double total_seconds = 0.0;
    void add(double seconds);
    HostGapStats stats() const;
  };

  void step();
  // The step of the overlapped loop: schedule and launch N+1, then collect and process N.
  void overlapped_step();
  // Builds the step's batch and sampling rows (runner.prepare + rows) and the tracer's view.
  void prepare(const SchedulerOutput& scheduled);
  // Runs the step on the executor (forward and sample) and collects its tokens; false after a
  // failed step (its requests are failed then).
  bool execute(const SchedulerOutput& scheduled, SampledTokens& sampled);
  // Collects the oldest launched step and processes its tokens (overlapped steps).
  void complete(const InFlightStep& step);
  // complete() of the step in flight, if any.
  void finish_in_flight();
  void fill_sampling_rows(const SchedulerOutput& scheduled);
  // The allowed-token masks of constrained requests' rows (request_constraint.h), started on the
  // filler; wait_for_constraint_masks() once the step has run (or failed).
  void fill_constraint_masks(const SchedulerOutput& scheduled);
  void wait_for_constraint_masks();
  // Advances the constraint of the request at `slot` by `token`; false when it failed.
  bool follow_constraint(std::int32_t slot, std::int32_t token);
  // Ends requests whose constraint failed this step, with the reason.
  void end_failed_constraints();
  void collect(const SchedulerOutput& scheduled, std::span<const std::int32_t> first_row,
               std::span<const ModelRunner::PromptRows> prompt_rows, const StepOutput& out,
               SampledTokens& sampled);
  void emit(const std::vector<RequestUpdate>& updates);
  void follow_reasoning(const std::vector<ReasoningProgress>& progress);
  void fail_step(const SchedulerOutput& scheduled, const Status& error);
  // Waits for the step in flight, if any, and drops its output; every step so far is done.
  void drop_in_flight();
  // Steps up to `step_id` are over: slots they named may go back to the allocator.
  void step_done(std::int64_t step_id);
  // Host gap bookkeeping around a launch (HostGapStats).
  void begin_launch();
  void end_launch();
  // Sends an output to the channel of the request at `slot`; a final one releases the slot and
  // waits in finals_to_send_ for the next publish_stats().
  void deliver(std::int32_t slot, RequestOutput output, Status error = Status::ok_status());
  // The live request at `slot`.
  LiveRequest& live(std::int32_t slot) { return live_[static_cast<std::size_t>(slot)]; }
  // Ends a request's life in the engine: its slot on the executor, in the speculator, the
  // tracer and the output processor, and here. The slot itself (and the executor's sampling
  // state) goes back once no launched step names it.
  void release_slot(std::int32_t slot);
  void free_slot(std::int32_t slot);
  // Publishes the stats, then sends the final outputs delivered since the last call. Every path
  // that delivers ends with it (each loop turn that applied commands or ran a step, and the stop).
  void publish_stats();
  void copy_stats(const SchedulerStats& s);  // mutex_ held

  EngineConfig config_;
  std::unique_ptr<ModelExecutor> executor_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Scheduler scheduler_;
  ModelRunner runner_;
  OutputProcessor outputs_;
  RequestTracer tracer_;
  // Set when --speculative-config is given.
  std::unique_ptr<Speculator> speculator_;
  SlotAllocator slots_;
  std::vector<LiveRequest> live_;  // by slot
  // The one map from a client's id to its slot (aborts and outputs name requests by id).
  StringMap<std::int32_t> slot_of_;
  // Logprobs of the step by slot (a row asked for them); reused between steps.
  std::vector<const SampledLogprobs*> step_logprobs_;
  std::vector<std::int32_t> end_tag_ids_;
  // Seeds of requests that bring none: a server seed and a counter.
  std::uint64_t server_seed_ = 0;
  std::uint64_t num_unseeded_ = 0;
  // Overlapped steps are on (async_scheduling, no speculator).
  bool overlap_ = false;
  // The step-time target's token budget (EngineConfig::step_time_target_seconds); unset: off.
  std::optional<StepTimeBudget> step_budget_;
  static constexpr std::int64_t kMinStepBudgetTokens = 32;
  std::optional<InFlightStep> in_flight_;
  StepOutput collected_;  // the output of the step complete() collects; capacity kept
  // The last step that named each slot, by slot; slots of ended requests wait in
  // deferred_slots_ until done_step_id_ reaches it.
  std::vector<std::int64_t> slot_last_step_;
  std::vector<std::int32_t> deferred_slots_;
  std::int64_t done_step_id_ = 0;
  struct FinalToSend {
    std::shared_ptr<OutputChannel> channel;
    StreamOutput item;
  };
  std::vector<FinalToSend> finals_to_send_;
  // Host gaps: since when the host has been working towards the next launch (unset: idle),
  // and how long of that it waited for the device.
  std::optional<std::chrono::steady_clock::time_point> gap_start_;
  double gap_waited_seconds_ = 0.0;
  HostGapHistogram host_gap_;
  std::int64_t num_steps_ = 0;
  std::int64_t num_failed_steps_ = 0;
  std::int64_t num_generated_tokens_ = 0;
  // Fills constrained rows' masks beside the forward pass; made on the first constrained step.
  std::unique_ptr<ConstraintMaskFiller> mask_filler_;
  std::vector<std::int32_t> failed_constraint_slots_;
  const std::chrono::steady_clock::time_point start_time_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::vector<Command> commands_;
  bool stop_requested_ = false;
  bool drain_ = false;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace pagoda::engine
