#include "grpc/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "grpc/health/v1/health.pb.h"

namespace pagoda::grpc {

namespace {

namespace protobuf = google::protobuf;
using ::grpc::reflection::v1::ServerReflectionRequest;
using ::grpc::reflection::v1::ServerReflectionResponse;

// Hands the built server's service list to the reflection service. gRPC gives the list only to
// builder plugins (ServerInitializer), and a builder option is how one builder gets a plugin.
class ServiceListPlugin final : public ::grpc::ServerBuilderPlugin {
 public:
  explicit ServiceListPlugin(ReflectionService* service) : service_(service) {}
  std::string name() override { return "pagoda_reflection_v1"; }
  void InitServer(::grpc::ServerInitializer*) override {}
  // After Start: the list then includes the default health service.
  void Finish(::grpc::ServerInitializer* initializer) override {
    service_->set_service_names(initializer->GetServiceList());
  }
  void ChangeArguments(const std::string&, void*) override {}

 private:
  ReflectionService* service_;
};

class ServiceListOption final : public ::grpc::ServerBuilderOption {
 public:
  explicit ServiceListOption(ReflectionService* service) : service_(service) {}
  void UpdateArguments(::grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<::grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ServiceListPlugin>(service_));
  }

 private:
  ReflectionService* service_;
};

void set_error(ServerReflectionResponse& response, ::grpc::StatusCode code,
               const std::string& message) {
  response.mutable_error_response()->set_error_code(static_cast<std::int32_t>(code));
  response.mutable_error_response()->set_error_message(message);
}

// `file` and every file it imports, each once, `file` first (what clients build a pool from).
void add_file(const protobuf::FileDescriptor* file, std::unordered_set<std::string>& seen,
              ServerReflectionResponse& response) {
  if (!seen.insert(file->name()).second) return;
  protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(
      response.mutable_file_descriptor_response()->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) add_file(file->dependency(i), seen, response);
}

void answer_file(const protobuf::FileDescriptor* file, const std::string& what,
                 ServerReflectionResponse& response) {
  if (file == nullptr) {
    set_error(response, ::grpc::StatusCode::NOT_FOUND, what + " not found");
    return;
  }
  std::unordered_set<std::string> seen;
  add_file(file, seen, response);
}

}  // namespace

ReflectionService::ReflectionService() {
  // Links health.pb.cc, whose static initializer puts health.proto in the generated pool; no
  // other code refers to it (gRPC's default health service has its own encoding).
  ::grpc::health::v1::HealthCheckRequest::descriptor();
}

void ReflectionService::add_to(::grpc::ServerBuilder& builder) {
  builder.RegisterService(this);
  builder.SetOption(std::make_unique<ServiceListOption>(this));
}

::grpc::Status ReflectionService::ServerReflectionInfo(
    ::grpc::ServerContext*,
    ::grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) {
  ServerReflectionRequest request;
  while (stream->Read(&request)) {
    if (!stream->Write(answer(request))) break;
  }
  return ::grpc::Status::OK;
}

ServerReflectionResponse ReflectionService::answer(const ServerReflectionRequest& request) const {
  const protobuf::DescriptorPool& pool = *protobuf::DescriptorPool::generated_pool();
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kListServices: {
      auto& list = *response.mutable_list_services_response();
      if (const std::vector<std::string>* names = service_names_.load()) {
        for (const std::string& name : *names) list.add_service()->set_name(name);
      }
      break;
    }
    case ServerReflectionRequest::kFileByFilename:
      answer_file(pool.FindFileByName(request.file_by_filename()),
                  "file " + request.file_by_filename(), response);
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      answer_file(pool.FindFileContainingSymbol(request.file_containing_symbol()),
                  "symbol " + request.file_containing_symbol(), response);
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& ask = request.file_containing_extension();
      const protobuf::Descriptor* type = pool.FindMessageTypeByName(ask.containing_type());
      const protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool.FindExtensionByNumber(type, ask.extension_number());
      answer_file(extension == nullptr ? nullptr : extension->file(),
                  "extension " + std::to_string(ask.extension_number()) + " of " +
                      ask.containing_type(),
                  response);
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const protobuf::Descriptor* type =
          pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        set_error(response, ::grpc::StatusCode::NOT_FOUND,
                  "type " + request.all_extension_numbers_of_type() + " not found");
        break;
      }
      std::vector<const protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto& numbers = *response.mutable_all_extension_numbers_response();
      numbers.set_base_type_name(type->full_name());
      for (const protobuf::FieldDescriptor* e : extensions) numbers.add_extension_number(e->number());
      break;
    }
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      set_error(response, ::grpc::StatusCode::INVALID_ARGUMENT,
                "the request names nothing to look up");
      break;
  }
  return response;
}

}  // namespace pagoda::grpc
