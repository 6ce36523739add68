// What frontends call: a thread-safe handle on the engine. submit() validates a request with
// Statuses (the same rules for HTTP and gRPC), fans n > 1 out into n engine requests that share
// the prompt through the prefix cache, and returns the stream the outputs arrive on.
//
//   frontend thread                 engine thread
//   submit(req) -> OutputStream     step ... push(delta) ... push(final)
//   stream.next() <------------------------------ OutputChannel (bounded, coalescing)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_core.h"
#include "engine/output_channel.h"
#include "pagoda/model_executor.h"
#include "pagoda/sampling_params.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda::engine {

/// A request as a frontend hands it over (vLLM's SamplingParams fields, split by who uses them).
struct EngineRequest {
  /// Unique among live requests; empty lets the client pick one.
  std::string request_id;
  std::vector<std::int32_t> prompt_token_ids;
  /// Token-level sampling (penalties, seed, logprobs, n, min_tokens, ...).
  SamplingParams sampling;
  /// Most tokens to generate; unset: up to max_model_len.
  std::optional<std::int64_t> max_tokens;
  /// Keep going past EOS (benchmarks).
  bool ignore_eos = false;
  /// Extra token ids that stop generation.
  std::vector<std::int32_t> stop_token_ids;
  /// Stop strings, matched on the text.
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  /// Deltas after every step (true) or one final output (false).
  bool stream = true;
  /// Smaller runs first under the priority policy.
  std::int32_t priority = 0;
  /// Requests with different salts never share cached prefix blocks.
  std::string cache_salt;
  /// Return the thinking span as RequestOutput::reasoning_text instead of inside `text` (chat;
  /// needs EngineConfig::reasoning, ignored without).
  bool separate_reasoning = false;
  /// Reasoning budget: after this many tokens inside the thinking span the engine closes it by
  /// forcing the end tag (needs EngineConfig::reasoning). Unset: no budget.
  std::optional<std::int64_t> max_reasoning_tokens;
  /// Trace this request (X-Pagoda-Trace, gRPC metadata) when a trace sink is configured; the
  /// sample rate (EngineConfig::trace_sample_rate) may trace others too.
  bool trace = false;
  /// Structured output: the output must match this (after a thinking span, with a reasoning
  /// parser); null: unconstrained. Needs a stop token (EOS, or stop_token_ids with ignore_eos).
  std::shared_ptr<const structured::CompiledConstraint> constraint;
};

/// The outputs of one submitted request; thread-safe.
class OutputStream {
 public:
  OutputStream(std::string request_id, std::int64_t num_samples,
               std::shared_ptr<OutputChannel> channel);

  /// The request's id (given or assigned).
  const std::string& request_id() const { return request_id_; }
  /// n: the stream ends after this many final outputs, one per StreamOutput::index.
  std::int64_t num_samples() const { return num_samples_; }
  /// Blocks for the next output. DEADLINE_EXCEEDED when `timeout` passes first; OUT_OF_RANGE
  /// once every final output has been taken.
  StatusOr<StreamOutput> next(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /// The next output if one is ready.
  std::optional<StreamOutput> try_next();
  /// Whether every final output has been taken.
  bool ended() const { return channel_->ended(); }
  /// Wakes an asynchronous consumer after each new output (OutputChannel::set_listener); the
  /// consumer then drains with try_next() on its own thread.
  void set_listener(std::function<void()> listener) { channel_->set_listener(std::move(listener)); }

 private:
  std::string request_id_;
  std::int64_t num_samples_;
  std::shared_ptr<OutputChannel> channel_;
};

/// The engine as frontends see it.
class EngineClient {
 public:
  /// Resolves `config` against `executor` (KV budget, max_model_len), allocates the KV pool and
  /// starts the engine thread.
  static StatusOr<std::unique_ptr<EngineClient>> create(EngineConfig config,
                                                        std::unique_ptr<ModelExecutor> executor,
                                                        std::shared_ptr<const Tokenizer> tokenizer);
  /// shutdown(/*drain=*/false).
  ~EngineClient();

  /// Validates and queues `request`. INVALID_ARGUMENT naming the field (empty or too long
  /// prompt, token ids outside the vocabulary, bad sampling or output options);
  /// RESOURCE_EXHAUSTED when max_num_seqs + max_waiting_requests are already in flight;
  /// UNAVAILABLE after shutdown.
  StatusOr<std::shared_ptr<OutputStream>> submit(EngineRequest request);
  /// Ends a request (all n samples); its stream gets a final output with finish_reason "abort".
  /// Unknown or finished ids are ignored.
  void abort(const std::string& request_id);
  /// Stops accepting requests, then finishes (drain) or aborts every accepted one; each gets
  /// its final output. Idempotent; joins the engine thread.
  void shutdown(bool drain);

  /// Whether the engine thread runs and accepts requests.
  bool healthy() const;
  /// Engine gauges and counters.
  EngineStats stats() const { return core_->stats(); }
  /// Samples accepted whose final output has not been produced yet.
  std::int64_t num_in_flight() const { return state_->in_flight.load(); }
  /// The resolved configuration.
  const EngineConfig& config() const { return core_->config(); }
  /// The model's logits width (token ids are checked against it; constraints cover it).
  std::int64_t vocab_size() const { return vocab_size_; }

 private:
  // Shared with every channel's on_final callback (run on the engine thread).
  struct SharedState {
    std::atomic<std::int64_t> in_flight{0};
    std::mutex mutex;
    // n of live requests with n > 1, so abort() can reach every sample.
    std::unordered_map<std::string, std::int64_t> num_samples;
  };

  EngineClient(std::unique_ptr<EngineCore> core, std::int64_t vocab_size);
  Status validate(const EngineRequest& request) const;

  std::unique_ptr<EngineCore> core_;
  std::int64_t vocab_size_;
  std::shared_ptr<SharedState> state_ = std::make_shared<SharedState>();
  std::atomic<bool> accepting_{true};
  std::atomic<std::uint64_t> next_id_{0};
  // Draws for trace_sample_rate.
  std::mutex trace_rng_mutex_;
  std::mt19937_64 trace_rng_{std::random_device{}()};
};

/// The engine request id of sample `index` of client request `request_id` (vLLM's "i_id").
std::string sample_request_id(const std::string& request_id, std::int64_t index,
                              std::int64_t num_samples);

}  // namespace pagoda::engine
