#include "grpc/inference_service.h"

#include <string_view>
#include <utility>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/tokenize_api.h"
#include "common/check.h"
#include "grpc/generate_reactor.h"
#include "grpc/grpc_status.h"
#include "grpc/request_json.h"
#include "server/api_key.h"

namespace pagoda::grpc {

namespace {

// Long enough for a UUID with a prefix; short enough to keep ids out of the memory budget.
constexpr std::size_t kMaxRequestIdBytes = 128;

::grpc::ServerUnaryReactor* finish(::grpc::CallbackServerContext* context,
                                   const ::grpc::Status& status) {
  ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

InferenceService::InferenceService(std::string api_key) : api_key_(std::move(api_key)) {}

void InferenceService::set_backend(InferenceBackend backend) {
  PAGODA_CHECK(backend.model != nullptr && backend.engine != nullptr) << "incomplete backend";
  std::lock_guard lock(mutex_);
  backend_ = std::move(backend);
}

void InferenceService::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

InferenceService::Admission InferenceService::admit(const ::grpc::CallbackServerContext& context,
                                                    bool while_draining) const {
  if (!api_key_.empty()) {
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    const bool matches = it != metadata.end() &&
                         server::bearer_token_matches(
                             std::string_view(it->second.data(), it->second.size()), api_key_);
    if (!matches) {
      return {.status = ::grpc::Status(::grpc::StatusCode::UNAUTHENTICATED,
                                       "missing or wrong API key: send the metadata "
                                       "'authorization: Bearer <key>'")};
    }
  }
  std::lock_guard lock(mutex_);
  if (draining_ && !while_draining) {
    return {.status = ::grpc::Status(::grpc::StatusCode::UNAVAILABLE,
                                     "the server is shutting down; retry on another replica")};
  }
  if (!backend_) {
    return {.status = ::grpc::Status(::grpc::StatusCode::UNAVAILABLE,
                                     "the model is still loading; retry shortly")};
  }
  return {.backend = backend_, .status = ::grpc::Status::OK};
}

api::ApiErrorOr<api::GenerationJob> InferenceService::prepare(const v1::GenerateRequest& request,
                                                              const InferenceBackend& backend,
                                                              bool trace) {
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return api::ApiError::invalid_request(
        "'request_id' is " + std::to_string(request.request_id().size()) + " bytes; at most " +
            std::to_string(kMaxRequestIdBytes) + " are allowed",
        "request_id");
  }
  api::ApiErrorOr<GenerateJson> json = generate_request_json(request);
  if (!json.ok()) return json.error();
  const api::RequestContext context{.id = request.request_id()};
  api::ApiErrorOr<api::GenerationJob> job =
      json->endpoint == api::ApiEndpoint::kChatCompletions
          ? api::parse_chat_request(json->body, *backend.model, context)
          : api::parse_completion_request(json->body, *backend.model, context);
  if (!job.ok()) return job.error();
  PAGODA_CHECK(job->requests.size() == 1) << "one input makes one engine request";
  engine::EngineRequest& engine_request = job->requests.front();
  if (trace) engine_request.trace = true;
  const std::string& id = engine_request.request_id;
  if (!registry_->add(id)) {
    return api::ApiError::invalid_request(
        "'request_id' \"" + id + "\" is already in flight; use a unique id", "request_id");
  }
  return std::move(*job);
}

::grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(
    ::grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  Admission admission = admit(*context);
  if (!admission.backend) return new RefusedGenerate(admission.status);
  // x-pagoda-trace: 1 (or true) asks for a reasoning trace, as HTTP's X-Pagoda-Trace header.
  const auto& metadata = context->client_metadata();
  const auto trace_it = metadata.find("x-pagoda-trace");
  const bool trace =
      trace_it != metadata.end() && (trace_it->second == "1" || trace_it->second == "true");
  api::ApiErrorOr<api::GenerationJob> job = prepare(*request, *admission.backend, trace);
  if (!job.ok()) {
    // Counted as HTTP counts a refused generation request (the same status_code label).
    if (admission.backend->metrics)
      admission.backend->metrics->record_rejected(job.error().http_status);
    return new RefusedGenerate(to_grpc_status(job.error()));
  }
  return GenerateReactor::start(std::move(*job), *admission.backend, executor_, registry_);
}

::grpc::ServerUnaryReactor* InferenceService::Tokenize(::grpc::CallbackServerContext* context,
                                                       const v1::TokenizeRequest* request,
                                                       v1::TokenizeResponse* response) {
  Admission admission = admit(*context);
  if (!admission.backend) return finish(context, admission.status);
  api::ApiErrorOr<api::Json> body = tokenize_request_json(*request);
  if (!body.ok()) return finish(context, to_grpc_status(body.error()));
  api::ApiErrorOr<api::Json> result = api::tokenize_response(*body, *admission.backend->model);
  if (!result.ok()) return finish(context, to_grpc_status(result.error()));
  for (const api::Json& id : (*result)["tokens"]) response->add_token_ids(id.get<std::int32_t>());
  if (const api::Json& strs = (*result)["token_strs"]; strs.is_array()) {
    for (const api::Json& piece : strs) response->add_token_strs(piece.get<std::string>());
  }
  response->set_max_model_len((*result)["max_model_len"].get<std::int64_t>());
  return finish(context, ::grpc::Status::OK);
}

::grpc::ServerUnaryReactor* InferenceService::Detokenize(::grpc::CallbackServerContext* context,
                                                         const v1::DetokenizeRequest* request,
                                                         v1::DetokenizeResponse* response) {
  Admission admission = admit(*context);
  if (!admission.backend) return finish(context, admission.status);
  api::ApiErrorOr<api::Json> result =
      api::detokenize_response(detokenize_request_json(*request), *admission.backend->model);
  if (!result.ok()) return finish(context, to_grpc_status(result.error()));
  response->set_text((*result)["prompt"].get<std::string>());
  return finish(context, ::grpc::Status::OK);
}

::grpc::ServerUnaryReactor* InferenceService::GetModelInfo(::grpc::CallbackServerContext* context,
                                                           const v1::GetModelInfoRequest*,
                                                           v1::GetModelInfoResponse* response) {
  Admission admission = admit(*context);
  if (!admission.backend) return finish(context, admission.status);
  const api::ServedModel& model = *admission.backend->model;
  response->set_name(model.name());
  for (const std::string& name : model.names) response->add_served_names(name);
  response->set_root(model.root);
  response->set_architecture(admission.backend->architecture);
  response->set_max_model_len(model.max_model_len);
  response->set_vocab_size(model.vocab_size);
  response->set_has_chat_template(model.chat_template.has_value());
  return finish(context, ::grpc::Status::OK);
}

::grpc::ServerUnaryReactor* InferenceService::GetLoad(::grpc::CallbackServerContext* context,
                                                      const v1::GetLoadRequest*,
                                                      v1::GetLoadResponse* response) {
  Admission admission = admit(*context);
  if (!admission.backend) return finish(context, admission.status);
  const engine::EngineStats stats = admission.backend->engine->stats();
  response->set_num_running_requests(stats.num_running);
  response->set_num_waiting_requests(stats.num_waiting);
  response->set_kv_cache_usage(stats.kv_cache_usage);
  response->set_num_kv_blocks(stats.num_kv_blocks);
  return finish(context, ::grpc::Status::OK);
}

::grpc::ServerUnaryReactor* InferenceService::Abort(::grpc::CallbackServerContext* context,
                                                    const v1::AbortRequest* request,
                                                    v1::AbortResponse*) {
  Admission admission = admit(*context, /*while_draining=*/true);
  if (!admission.backend) return finish(context, admission.status);
  if (!registry_->contains(request->request_id())) {
    return finish(context, ::grpc::Status(::grpc::StatusCode::NOT_FOUND,
                                          "no Generate call with request_id \"" +
                                              request->request_id() + "\" is in flight"));
  }
  // A call still compiling its constraint ends itself; one in the engine is aborted there.
  if (std::function<void()> hook = registry_->abort_hook(request->request_id())) hook();
  admission.backend->engine->abort(request->request_id());
  return finish(context, ::grpc::Status::OK);
}

}  // namespace pagoda::grpc
