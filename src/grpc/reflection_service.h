// grpc.reflection.v1.ServerReflection: which services this port serves and what their messages
// look like, for clients that know nothing in advance (grpcurl, Postman, grpcio's reflection
// client). Debian's gRPC 1.51 serves only v1alpha (its plugin, registered beside this one); v1
// carries the same messages under a new package name. Both answer from protobuf's generated
// pool, which holds every .proto compiled into pagoda, grpc/health/v1/health.proto included.
//
//   client                                   ReflectionService
//   list_services ─────────────────────────> every service the server registered
//   file_containing_symbol "grpc.health.v1.Health"
//                 ─────────────────────────> health.proto (serialized FileDescriptorProto)
//                                            and the files it imports
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace pagoda::grpc {

/// The v1 reflection service (synchronous API, like the v1alpha one beside it).
class ReflectionService final : public ::grpc::reflection::v1::ServerReflection::Service {
 public:
  ReflectionService();

  /// Registers the service with `builder`, and arranges to read the list of every service the
  /// built server serves (health, both reflections and those added later included).
  void add_to(::grpc::ServerBuilder& builder);

  ::grpc::Status ServerReflectionInfo(
      ::grpc::ServerContext* context,
      ::grpc::ServerReaderWriter<::grpc::reflection::v1::ServerReflectionResponse,
                                 ::grpc::reflection::v1::ServerReflectionRequest>* stream) override;

  /// The answer to one request.
  ::grpc::reflection::v1::ServerReflectionResponse answer(
      const ::grpc::reflection::v1::ServerReflectionRequest& request) const;

  /// Set once the server is built: the server's own list, which lives as long as the server.
  void set_service_names(const std::vector<std::string>* names) { service_names_.store(names); }

 private:
  std::atomic<const std::vector<std::string>*> service_names_{nullptr};
};

}  // namespace pagoda::grpc
