#include "server/openai_service.h"

#include <utility>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/model_list.h"
#include "api/prometheus_writer.h"
#include "api/tokenize_api.h"

namespace pagoda::server {

namespace {

HttpReply json_or_error(const api::ApiErrorOr<api::Json>& result) {
  return result.ok() ? HttpReply::json(*result) : HttpReply::error(result.error());
}

}  // namespace

OpenAiService::OpenAiService(api::ServedModel model, engine::EngineClient& engine)
    : model_(std::move(model)),
      engine_(engine),
      metrics_(std::make_shared<api::ServingMetrics>(model_.name(), model_.max_model_len)) {}

HttpReply OpenAiService::models() const {
  return HttpReply::json(api::models_response(model_));
}

HttpReply OpenAiService::model(std::string_view name) const {
  return json_or_error(api::model_response(model_, name));
}

HttpReply OpenAiService::metrics() const {
  HttpReply reply;
  reply.content_type = std::string(api::kPrometheusContentType);
  if (model_.constraints) {
    const structured::CompilerStats compiles = model_.constraints->stats();
    reply.body = metrics_->render(engine_.stats(), &compiles);
  } else {
    reply.body = metrics_->render(engine_.stats());
  }
  return reply;
}

HttpReply OpenAiService::tokenize(const api::Json& body) const {
  return json_or_error(api::tokenize_response(body, model_));
}

HttpReply OpenAiService::detokenize(const api::Json& body) const {
  return json_or_error(api::detokenize_response(body, model_));
}

HttpReply OpenAiService::tokenizer_info() const {
  return json_or_error(api::tokenizer_info_response(model_));
}

api::ApiErrorOr<api::GenerationJob> OpenAiService::prepare_generation(Endpoint endpoint,
                                                                      const api::Json& body,
                                                                      bool trace) const {
  api::ApiErrorOr<api::GenerationJob> job = endpoint == Endpoint::kChatCompletions
                                                ? api::parse_chat_request(body, model_)
                                                : api::parse_completion_request(body, model_);
  if (job.ok() && trace) {
    for (engine::EngineRequest& request : job->requests) request.trace = true;
  }
  return job;
}

structured::CompileTicket OpenAiService::compile_constraint(
    const api::GenerationJob& job, structured::CompileCallback done) const {
  // The parser only leaves a constraint on a job when the model has a compiler.
  return model_.constraints->compile_async(job.constraint->spec, std::move(done));
}

api::ApiErrorOr<std::unique_ptr<GenerationCall>> OpenAiService::start_generation(
    api::GenerationJob job) {
  return GenerationCall::start(std::move(job), engine_, model_.tokenizer, metrics_);
}

}  // namespace pagoda::server
