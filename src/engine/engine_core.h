// The engine loop: one thread that owns the scheduler, the model runner, the samplers and output
// processing, and runs steps while there is work:
//
//   clients --add/abort--> command queue --> [ step: schedule, execute, sample, update, emit ]
//                                                                     |
//                                                 per-request OutputChannel <--+
//
// Nothing here throws across the loop: an executor error fails the step's requests with an error
// output and the loop goes on. With no work the thread sleeps on a condition variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/model_runner.h"
#include "engine/output_channel.h"
#include "engine/output_options.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/request_tracer.h"
#include "engine/scheduler.h"
#include "engine/speculator.h"
#include "pagoda/model_executor.h"
#include "pagoda/sampling_params.h"
#include "pagoda/tokenizer.h"
#include "sampling/batch_sampler.h"

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
  std::int64_t num_failed_steps = 0;  ///< Steps whose forward pass returned an error.
  std::int64_t num_generated_tokens = 0;
  // Reasoning traces (zeros without a trace sink).
  std::int64_t trace_events_written = 0;
  std::int64_t trace_events_dropped = 0;
  std::int64_t trace_bytes_written = 0;
  double trace_seconds = 0.0;  ///< Engine time spent producing trace data.
  bool running = false;        ///< The loop thread is alive.
  /// Speculative decoding (zeros when off).
  SpecDecodeStats spec_decode;
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
  struct LiveRequest {
    std::int64_t index = 0;
    std::shared_ptr<OutputChannel> channel;
    // Top logprobs the client asked for (the sampler may compute more for a trace).
    std::optional<std::int64_t> client_logprobs;
  };
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  EngineCore(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
             std::shared_ptr<const Tokenizer> tokenizer);

  void run();
  bool wait_for_work();
  void apply(Command& command);
  void add(EngineCoreRequest& request);
  void abort(std::string_view request_id, const Status& error);

  void step();
  SampledTokens sample(const SchedulerOutput& scheduled);
  void emit(const std::vector<RequestUpdate>& updates);
  void follow_reasoning(const std::vector<ReasoningProgress>& progress);
  void fail_step(const SchedulerOutput& scheduled, const Status& error);
  void deliver(RequestOutput output, Status error = Status::ok_status());
  // Drops a request's sampler and reasoning budget (it finished, stopped or was aborted).
  void forget_sampling(std::string_view request_id);
  void publish_stats();

  EngineConfig config_;
  std::unique_ptr<ModelExecutor> executor_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Scheduler scheduler_;
  ModelRunner runner_;
  sampling::BatchSampler sampler_;
  OutputProcessor outputs_;
  RequestTracer tracer_;
  // Set when --speculative-config is given.
  std::unique_ptr<Speculator> speculator_;
  std::unordered_map<std::string, LiveRequest, StringHash, std::equal_to<>> live_;
  // The step's logprobs by scheduled index; reused between steps.
  std::vector<std::optional<sampling::SampledLogprobs>> step_logprobs_;
  std::unordered_map<std::string_view, std::size_t> step_index_;
  // Reasoning budgets of live requests that have one; the end tag's ids once a budget is spent.
  struct ReasoningBudget {
    std::int64_t max_tokens = 0;
    bool spent = false;
    std::deque<std::int32_t> forced;
  };
  std::unordered_map<std::string, ReasoningBudget, StringHash, std::equal_to<>> budgets_;
  std::vector<std::int32_t> end_tag_ids_;
  std::int64_t num_steps_ = 0;
  std::int64_t num_failed_steps_ = 0;
  std::int64_t num_generated_tokens_ = 0;
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
