// One chat or completion request in flight: its engine streams (one per prompt) and the encoder
// that turns their outputs into SSE events or the final body. The HTTP session owns it on its
// strand; the engine only ever calls the listener, which must hand the work to that strand.
//
//   engine thread: channel.push ──listener──> post(strand)
//   strand:        drain() ── try_next() per stream ──> ResponseEncoder::add ──> bytes to write
//
// Destroying a call that has not finished aborts it, so a vanished client frees its KV blocks
// within one engine step. The final outputs of the aborted streams still come, with nobody left
// to read them: each stream's listener then takes them on the engine thread and counts them in
// the metrics, so every request that ends is counted once, however it ended.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/generation_job.h"
#include "api/response_encoder.h"
#include "api/serving_metrics.h"
#include "engine/engine_client.h"

namespace pagoda::server {

/// A submitted GenerationJob. Not thread-safe except where noted.
class GenerationCall {
 public:
  /// Submits every request of `job`. When one is refused (full queue, shutdown), the ones
  /// already submitted are aborted and the refusal is returned.
  static api::ApiErrorOr<std::unique_ptr<GenerationCall>> start(
      api::GenerationJob job, engine::EngineClient& engine,
      std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<api::ServingMetrics> metrics);
  ~GenerationCall();
  GenerationCall(const GenerationCall&) = delete;
  GenerationCall& operator=(const GenerationCall&) = delete;

  /// Called on the engine thread after each output of any stream (OutputChannel::set_listener).
  void set_listener(const std::function<void()>& listener);
  /// Takes every ready output. Streaming: the SSE events to send now (maybe empty).
  std::string drain();
  /// Whether every choice has its final output.
  bool finished() const { return encoder_.finished(); }
  /// Streaming, once finished: the usage chunk (when asked for) and [DONE].
  std::string finish_stream() { return encoder_.finish_stream(); }
  /// Non-streaming, once finished: the response body and its status.
  api::EncodedBody finish_body() { return encoder_.finish_body(); }
  /// Ends every stream that has not finished (client gone, shutdown).
  void abort();

  bool streaming() const { return options_.stream; }
  /// The response id ("chatcmpl-...", "cmpl-...").
  const std::string& id() const { return options_.id; }
  /// Prompt tokens of every prompt.
  std::int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  /// Tokens generated so far, over every choice.
  std::int64_t num_completion_tokens() const { return num_completion_tokens_; }

 private:
  GenerationCall(api::ResponseOptions options, std::shared_ptr<const Tokenizer> tokenizer,
                 engine::EngineClient& engine, std::shared_ptr<api::ServingMetrics> metrics);

  api::ResponseOptions options_;
  api::ResponseEncoder encoder_;
  engine::EngineClient& engine_;
  const std::shared_ptr<api::ServingMetrics> metrics_;
  std::vector<std::shared_ptr<engine::OutputStream>> streams_;
  std::int64_t num_prompt_tokens_ = 0;
  std::int64_t num_completion_tokens_ = 0;
};

}  // namespace pagoda::server
