#include "grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <utility>

#include "grpc/inference_service.h"
#include "grpc/reflection_service.h"

namespace pagoda::grpc {

namespace {

// How long stop() waits for the engine to confirm the aborts of cancelled calls; the engine
// answers within one step, so this only bounds a stuck engine.
constexpr std::chrono::seconds kAbortWait{10};

std::string listen_address(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

GrpcServer::GrpcServer(GrpcServerConfig config)
    : config_(std::move(config)),
      service_(std::make_unique<InferenceService>(config_.api_key)),
      reflection_(std::make_unique<ReflectionService>()) {}

GrpcServer::~GrpcServer() {
  stop();
}

Status GrpcServer::start() {
  PAGODA_RETURN_IF_ERROR(config_.validate());
  // Both are process-wide switches read when a builder is made. gRPC's plugin serves v1alpha
  // reflection; reflection_ serves v1.
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ::grpc::ServerBuilder builder;
  const std::string address = listen_address(config_.host, config_.port);
  builder.AddListeningPort(address, ::grpc::InsecureServerCredentials(), &port_);
  // gRPC sets SO_REUSEPORT by default, which would let a second server share the port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_receive_message_bytes));
  builder.RegisterService(service_.get());
  reflection_->add_to(builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return {StatusCode::kUnavailable, "cannot listen for gRPC on " + address +
                                          ": is the port in use? Pick another with --grpc-port"};
  }
  set_serving(false);
  return Status::ok_status();
}

void GrpcServer::set_backend(InferenceBackend backend) {
  service_->set_backend(std::move(backend));
  set_serving(true);
}

void GrpcServer::begin_drain() {
  service_->begin_drain();
  set_serving(false);
}

bool GrpcServer::wait_until_idle(std::chrono::milliseconds timeout) const {
  return service_->registry()->wait_until_empty(timeout);
}

std::int64_t GrpcServer::num_active_calls() const {
  return static_cast<std::int64_t>(service_->registry()->size());
}

void GrpcServer::stop(std::chrono::milliseconds grace) {
  if (stopped_.exchange(true)) return;
  if (server_ != nullptr) {
    begin_drain();
    // Calls still in flight at the deadline are cancelled; each aborts its engine request.
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
    service_->registry()->wait_until_empty(kAbortWait);
  }
  service_->executor()->shutdown();
}

void GrpcServer::set_serving(bool serving) {
  if (server_ == nullptr) return;
  ::grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(std::string(v1::InferenceService::service_full_name()), serving);
}

}  // namespace pagoda::grpc
