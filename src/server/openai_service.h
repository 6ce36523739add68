// The endpoints' work once a request is routed, authenticated and its body parsed: the protocol
// layer (src/api) over one served model and its engine. Thread-safe; shared by every session
// once the model has loaded.
#pragma once

#include <memory>
#include <string_view>

#include "api/api_error.h"
#include "api/served_model.h"
#include "api/serving_metrics.h"
#include "engine/engine_client.h"
#include "server/generation_call.h"
#include "server/http_reply.h"
#include "server/router.h"

namespace pagoda::server {

/// What the HTTP endpoints answer with, for one model.
class OpenAiService {
 public:
  /// `engine` must outlive the service.
  OpenAiService(api::ServedModel model, engine::EngineClient& engine);

  /// GET /v1/models, /v1/models/{name}, /metrics; POST /tokenize, /detokenize.
  HttpReply models() const;
  HttpReply model(std::string_view name) const;
  HttpReply metrics() const;
  HttpReply tokenize(const api::Json& body) const;
  HttpReply detokenize(const api::Json& body) const;
  /// GET /tokenizer_info.
  HttpReply tokenizer_info() const;

  /// Validates a chat or completion body into a job; `trace` (the X-Pagoda-Trace header)
  /// traces it as the body's "trace": true does. A job with a constraint is compiled
  /// (compile_constraint) before it is submitted.
  api::ApiErrorOr<api::GenerationJob> prepare_generation(Endpoint endpoint, const api::Json& body,
                                                         bool trace = false) const;
  /// Compiles `job.constraint` off the calling thread; `done` gets the result (see
  /// ConstraintCompiler::compile_async), for api::attach_constraint.
  structured::CompileTicket compile_constraint(const api::GenerationJob& job,
                                               structured::CompileCallback done) const;
  /// Submits a job (its constraint attached) to the engine.
  api::ApiErrorOr<std::unique_ptr<GenerationCall>> start_generation(api::GenerationJob job);
  /// Counts a generation request refused before it reached the engine.
  void record_rejected(int http_status) { metrics_->record_rejected(http_status); }

  const api::ServedModel& served_model() const { return model_; }
  /// The registry behind /metrics, for the gRPC server to count its requests in.
  const std::shared_ptr<api::ServingMetrics>& serving_metrics() const { return metrics_; }
  engine::EngineClient& engine() const { return engine_; }

 private:
  const api::ServedModel model_;
  engine::EngineClient& engine_;
  // Shared with the calls in flight, which may count their last outputs after the service has
  // gone (a client that left just before shutdown).
  const std::shared_ptr<api::ServingMetrics> metrics_;
};

}  // namespace pagoda::server
