#include "engine/engine_client.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

std::string sample_request_id(const std::string& request_id, std::int64_t index,
                              std::int64_t num_samples) {
  return num_samples == 1 ? request_id : std::to_string(index) + "_" + request_id;
}

OutputStream::OutputStream(std::string request_id, std::int64_t num_samples,
                           std::shared_ptr<OutputChannel> channel)
    : request_id_(std::move(request_id)), num_samples_(num_samples), channel_(std::move(channel)) {}

StatusOr<StreamOutput> OutputStream::next(std::optional<std::chrono::milliseconds> timeout) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout) deadline = std::chrono::steady_clock::now() + *timeout;
  std::optional<StreamOutput> item = channel_->pop(deadline);
  if (item) return std::move(*item);
  if (channel_->ended()) return out_of_range("the stream of " + request_id_ + " has ended");
  return Status(StatusCode::kDeadlineExceeded, "no output for " + request_id_ + " in time");
}

std::optional<StreamOutput> OutputStream::try_next() {
  return channel_->try_pop();
}

StatusOr<std::unique_ptr<EngineClient>> EngineClient::create(
    EngineConfig config, std::unique_ptr<ModelExecutor> executor,
    std::shared_ptr<const Tokenizer> tokenizer) {
  PAGODA_CHECK(executor != nullptr) << "no executor";
  PAGODA_ASSIGN_OR_RETURN(EngineConfig resolved,
                          resolve_engine_config(std::move(config), *executor));
  const std::int64_t vocab = executor->info().vocab_size;
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core,
                          EngineCore::create(resolved, std::move(executor), std::move(tokenizer)));
  return std::unique_ptr<EngineClient>(new EngineClient(std::move(core), vocab));
}

EngineClient::EngineClient(std::unique_ptr<EngineCore> core, std::int64_t vocab_size)
    : core_(std::move(core)), vocab_size_(vocab_size) {}

EngineClient::~EngineClient() {
  shutdown(/*drain=*/false);
}

Status EngineClient::validate(const EngineRequest& r) const {
  const std::int64_t prompt = static_cast<std::int64_t>(r.prompt_token_ids.size());
  if (prompt == 0) return invalid_argument("prompt is empty; give at least one token");
  if (r.constraint && r.constraint->vocab_size() != vocab_size_) {
    return invalid_argument("the structured-output constraint was compiled for " +
                            std::to_string(r.constraint->vocab_size()) + " tokens, not the " +
                            "model's " + std::to_string(vocab_size_));
  }
  for (const std::int32_t id : r.prompt_token_ids) {
    if (id < 0 || id >= vocab_size_) {
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(vocab_size_) +
                              ")");
    }
  }
  const std::int64_t max_len = core_->config().scheduler.max_model_len;
  if (prompt >= max_len) {
    return invalid_argument("prompt has " + std::to_string(prompt) +
                            " tokens but max_model_len is " + std::to_string(max_len) +
                            ", which leaves no room to generate");
  }
  if (r.max_tokens && *r.max_tokens < 1) {
    return invalid_argument("max_tokens must be at least 1, got " + std::to_string(*r.max_tokens));
  }
  if (r.max_tokens && prompt + *r.max_tokens > max_len) {
    return invalid_argument("prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                            std::to_string(*r.max_tokens) + ") is over max_model_len " +
                            std::to_string(max_len) + "; set max_tokens to at most " +
                            std::to_string(max_len - prompt));
  }
  PAGODA_RETURN_IF_ERROR(r.sampling.validate(vocab_size_));
  const std::int64_t max_tokens = r.max_tokens.value_or(max_len - prompt);
  if (r.sampling.min_tokens > max_tokens) {
    return invalid_argument("min_tokens (" + std::to_string(r.sampling.min_tokens) +
                            ") is greater than max_tokens (" + std::to_string(max_tokens) + ")");
  }
  if (r.max_reasoning_tokens) {
    if (!core_->config().reasoning) {
      return invalid_argument(
          "max_reasoning_tokens needs a reasoning model: start the server with --reasoning-parser");
    }
    if (*r.max_reasoning_tokens < 0) {
      return invalid_argument("max_reasoning_tokens must be >= 0, got " +
                              std::to_string(*r.max_reasoning_tokens));
    }
  }
  for (const std::int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= vocab_size_) {
      return invalid_argument("stop_token_ids holds " + std::to_string(id) +
                              ", outside the vocabulary");
    }
  }
  return Status::ok_status();
}

StatusOr<std::shared_ptr<OutputStream>> EngineClient::submit(EngineRequest request) {
  if (!accepting_.load()) return Status(StatusCode::kUnavailable, "the engine is shutting down");
  PAGODA_RETURN_IF_ERROR(validate(request));
  const EngineConfig& config = core_->config();
  OutputOptions output{.stop = request.stop,
                       .include_stop_str_in_output = request.include_stop_str_in_output,
                       .skip_special_tokens = request.skip_special_tokens,
                       .min_tokens = request.sampling.min_tokens,
                       .stream = request.stream,
                       .reasoning = config.reasoning,
                       .separate_reasoning = request.separate_reasoning};
  if (request.sampling.logprobs) {
    output.num_logprobs = static_cast<std::int32_t>(*request.sampling.logprobs);
  }
  PAGODA_RETURN_IF_ERROR(output.validate());

  const std::int64_t n = request.sampling.n;
  const std::int64_t limit = config.scheduler.max_num_seqs + config.max_waiting_requests;
  // Reserve before queuing so concurrent submits cannot overshoot the limit together.
  if (state_->in_flight.fetch_add(n) + n > limit) {
    state_->in_flight.fetch_sub(n);
    return Status(StatusCode::kResourceExhausted,
                  "the engine queue is full (" + std::to_string(limit) +
                      " requests in flight); retry later or raise --max-waiting-requests");
  }
  if (request.request_id.empty()) request.request_id = "req-" + std::to_string(next_id_++);
  const std::string id = request.request_id;

  std::function<void()> on_final = [state = state_] { state->in_flight.fetch_sub(1); };
  if (n > 1) {
    {
      std::lock_guard lock(state_->mutex);
      state_->num_samples[id] = n;
    }
    auto left = std::make_shared<std::atomic<std::int64_t>>(n);
    on_final = [state = state_, left, id] {
      state->in_flight.fetch_sub(1);
      if (left->fetch_sub(1) == 1) {
        std::lock_guard lock(state->mutex);
        state->num_samples.erase(id);
      }
    };
  }
  auto channel =
      std::make_shared<OutputChannel>(config.output_channel_capacity, n, std::move(on_final));

  RequestOptions options{.max_tokens = request.max_tokens,
                         .min_tokens = request.sampling.min_tokens,
                         .ignore_eos = request.ignore_eos,
                         .eos_token_id = config.eos_token_id,
                         .stop_token_ids = request.stop_token_ids,
                         .priority = request.priority,
                         .arrival_time = core_->now(),
                         .cache_salt = request.cache_salt};
  // generation_config's other EOS ids stop like EOS, and ignore_eos ignores them too.
  if (!request.ignore_eos) {
    for (const std::int32_t eos : config.extra_eos_token_ids) options.stop_token_ids.push_back(eos);
  }
  bool traced = false;
  if (config.trace_sink) {
    traced = request.trace;
    if (!traced && config.trace_sample_rate > 0.0) {
      std::lock_guard lock(trace_rng_mutex_);
      traced =
          std::uniform_real_distribution<double>(0.0, 1.0)(trace_rng_) < config.trace_sample_rate;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    SamplingParams sampling = request.sampling;
    // Each sample draws its own tokens; a seeded request stays reproducible (vLLM: seed + i).
    if (sampling.seed) sampling.seed = *sampling.seed + static_cast<std::uint64_t>(i);
    core_->add_request({.request_id = sample_request_id(id, i, n),
                        .index = i,
                        .prompt_token_ids = request.prompt_token_ids,
                        .sampling = std::move(sampling),
                        .options = options,
                        .output = output,
                        .channel = channel,
                        .traced = traced,
                        .max_reasoning_tokens = request.max_reasoning_tokens,
                        .constraint = request.constraint});
  }
  return std::make_shared<OutputStream>(id, n, std::move(channel));
}

void EngineClient::abort(const std::string& request_id) {
  std::int64_t n = 1;
  {
    std::lock_guard lock(state_->mutex);
    if (const auto it = state_->num_samples.find(request_id); it != state_->num_samples.end()) {
      n = it->second;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) core_->abort_request(sample_request_id(request_id, i, n));
}

void EngineClient::shutdown(bool drain) {
  accepting_.store(false);
  core_->shutdown(drain);
}

bool EngineClient::healthy() const {
  return accepting_.load() && core_->stats().running;
}

}  // namespace pagoda::engine
