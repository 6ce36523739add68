// pagoda.v1.InferenceService on gRPC's callback API. Every call is checked the same way before
// it does anything: the API key (`authorization: Bearer <key>` metadata, compared in constant
// time), then availability (UNAVAILABLE while the model loads or the server drains). Requests
// are validated by the HTTP API's validator (request_json.h), so both transports agree.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/api_error.h"
#include "api/generation_job.h"
#include "grpc/inference_backend.h"
#include "grpc/request_registry.h"
#include "grpc/serial_executor.h"
#include "pagoda/v1/inference_service.grpc.pb.h"

namespace pagoda::grpc {

/// The service implementation. Thread-safe.
class InferenceService final : public v1::InferenceService::CallbackService {
 public:
  /// `api_key` empty: no authentication.
  explicit InferenceService(std::string api_key);

  /// Serves `backend` from now on.
  void set_backend(InferenceBackend backend);
  /// New calls get UNAVAILABLE from now on; calls in flight go on.
  void begin_drain();
  /// Generate calls in flight.
  std::shared_ptr<RequestRegistry> registry() const { return registry_; }
  /// The executor the streams' writes run on.
  std::shared_ptr<SerialExecutor> executor() const { return executor_; }

  ::grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      ::grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  ::grpc::ServerUnaryReactor* Tokenize(::grpc::CallbackServerContext* context,
                                       const v1::TokenizeRequest* request,
                                       v1::TokenizeResponse* response) override;
  ::grpc::ServerUnaryReactor* Detokenize(::grpc::CallbackServerContext* context,
                                         const v1::DetokenizeRequest* request,
                                         v1::DetokenizeResponse* response) override;
  ::grpc::ServerUnaryReactor* GetModelInfo(::grpc::CallbackServerContext* context,
                                           const v1::GetModelInfoRequest* request,
                                           v1::GetModelInfoResponse* response) override;
  ::grpc::ServerUnaryReactor* GetLoad(::grpc::CallbackServerContext* context,
                                      const v1::GetLoadRequest* request,
                                      v1::GetLoadResponse* response) override;
  ::grpc::ServerUnaryReactor* Abort(::grpc::CallbackServerContext* context,
                                    const v1::AbortRequest* request,
                                    v1::AbortResponse* response) override;

 private:
  // The backend for a call, or the status refusing it (UNAUTHENTICATED, UNAVAILABLE).
  struct Admission {
    std::optional<InferenceBackend> backend;
    ::grpc::Status status;
  };
  // `while_draining`: the call only touches requests already in flight (Abort).
  Admission admit(const ::grpc::CallbackServerContext& context, bool while_draining = false) const;
  // Validates one Generate request into a job and puts its id in the registry; a refusal
  // carries its HTTP status too.
  api::ApiErrorOr<api::GenerationJob> prepare(const v1::GenerateRequest& request,
                                              const InferenceBackend& backend, bool trace);

  const std::string api_key_;
  const std::shared_ptr<RequestRegistry> registry_ = std::make_shared<RequestRegistry>();
  const std::shared_ptr<SerialExecutor> executor_ = std::make_shared<SerialExecutor>();
  mutable std::mutex mutex_;  // guards the two below
  std::optional<InferenceBackend> backend_;
  bool draining_ = false;
};

}  // namespace pagoda::grpc
