#include "server/generation_call.h"

#include <utility>

namespace pagoda::server {

namespace {

// Counts the final outputs `stream` still owes as they arrive, then lets go of the stream. The
// listener holds the stream (whose channel holds the listener) until the last final output;
// removing itself then breaks the cycle (the channel keeps a listener alive while calling it).
void count_remaining_outputs(const std::shared_ptr<engine::OutputStream>& stream,
                             std::shared_ptr<api::ServingMetrics> metrics) {
  stream->set_listener([stream, metrics = std::move(metrics)] {
    while (std::optional<engine::StreamOutput> item = stream->try_next()) {
      if (item->output.finished) metrics->record_finished(*item);
    }
    if (stream->ended()) stream->set_listener(nullptr);
  });
}

}  // namespace

GenerationCall::GenerationCall(api::ResponseOptions options,
                               std::shared_ptr<const Tokenizer> tokenizer,
                               engine::EngineClient& engine,
                               std::shared_ptr<api::ServingMetrics> metrics)
    : options_(options),
      encoder_(std::move(options), std::move(tokenizer)),
      engine_(engine),
      metrics_(std::move(metrics)) {
  for (const std::int64_t n : options_.num_prompt_tokens) num_prompt_tokens_ += n;
}

api::ApiErrorOr<std::unique_ptr<GenerationCall>> GenerationCall::start(
    api::GenerationJob job, engine::EngineClient& engine,
    std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<api::ServingMetrics> metrics) {
  std::unique_ptr<GenerationCall> call(new GenerationCall(
      std::move(job.response), std::move(tokenizer), engine, std::move(metrics)));
  for (engine::EngineRequest& request : job.requests) {
    StatusOr<std::shared_ptr<engine::OutputStream>> stream = engine.submit(std::move(request));
    // The destructor aborts the prompts already submitted.
    if (!stream.ok()) return api::ApiError::from_status(stream.status());
    call->streams_.push_back(std::move(*stream));
  }
  return call;
}

GenerationCall::~GenerationCall() {
  for (const auto& stream : streams_) {
    if (stream->ended()) {
      stream->set_listener(nullptr);
    } else {
      count_remaining_outputs(stream, metrics_);
    }
  }
  abort();
}

void GenerationCall::set_listener(const std::function<void()>& listener) {
  for (const auto& stream : streams_) stream->set_listener(listener);
}

std::string GenerationCall::drain() {
  std::string events;
  for (std::size_t p = 0; p < streams_.size(); ++p) {
    while (std::optional<engine::StreamOutput> item = streams_[p]->try_next()) {
      num_completion_tokens_ += static_cast<std::int64_t>(item->output.token_ids.size());
      if (item->output.finished) metrics_->record_finished(*item);
      events += encoder_.add(p, *item);
    }
  }
  return events;
}

void GenerationCall::abort() {
  for (const auto& stream : streams_) {
    if (!stream->ended()) engine_.abort(stream->request_id());
  }
}

}  // namespace pagoda::server
