// The v1 reflection service answers from protobuf's generated pool: every service pagoda serves,
// the standard health service included, must be describable, imports and all.
#include "grpc/reflection_service.h"

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "pagoda/v1/inference_service.pb.h"

namespace pagoda::grpc {
namespace {

using ::grpc::reflection::v1::ServerReflectionRequest;
using ::grpc::reflection::v1::ServerReflectionResponse;

// The names of the files in a file_descriptor_response, in order.
std::vector<std::string> file_names(const ServerReflectionResponse& response) {
  std::vector<std::string> names;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    EXPECT_TRUE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  return names;
}

TEST(ReflectionService, DescribesTheHealthService) {
  ReflectionService service;
  ServerReflectionRequest request;
  request.set_host("h");
  request.set_file_containing_symbol("grpc.health.v1.Health");
  const ServerReflectionResponse response = service.answer(request);
  EXPECT_EQ(response.valid_host(), "h");
  EXPECT_EQ(response.original_request().file_containing_symbol(), "grpc.health.v1.Health");
  ASSERT_TRUE(response.has_file_descriptor_response()) << response.error_response().error_message();
  EXPECT_EQ(file_names(response), std::vector<std::string>{"grpc/health/v1/health.proto"});

  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  ASSERT_EQ(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Health");
  std::set<std::string> methods;
  for (const auto& method : file.service(0).method()) methods.insert(method.name());
  EXPECT_EQ(methods, (std::set<std::string>{"Check", "Watch"}));
}

TEST(ReflectionService, SendsAFileWithEveryFileItImportsOnce) {
  // Links inference_service.pb.cc, which registers the file (the server links it anyway).
  v1::AbortRequest::descriptor();
  ReflectionService service;
  ServerReflectionRequest request;
  request.set_file_containing_symbol("pagoda.v1.InferenceService.Generate");
  const std::vector<std::string> names = file_names(service.answer(request));
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "pagoda/v1/inference_service.proto");
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  EXPECT_TRUE(unique.contains("pagoda/v1/generate.proto"));
  EXPECT_TRUE(unique.contains("google/protobuf/struct.proto"));

  request.set_file_by_filename("grpc/reflection/v1/reflection.proto");
  EXPECT_EQ(file_names(service.answer(request)),
            std::vector<std::string>{"grpc/reflection/v1/reflection.proto"});
}

TEST(ReflectionService, UnknownNamesAreNotFound) {
  ReflectionService service;
  ServerReflectionRequest request;
  request.set_file_containing_symbol("no.such.Service");
  ServerReflectionResponse response = service.answer(request);
  ASSERT_TRUE(response.has_error_response());
  EXPECT_EQ(response.error_response().error_code(), ::grpc::StatusCode::NOT_FOUND);
  request.set_file_by_filename("no/such.proto");
  EXPECT_EQ(service.answer(request).error_response().error_code(), ::grpc::StatusCode::NOT_FOUND);
  request.mutable_file_containing_extension()->set_containing_type("pagoda.v1.GenerateRequest");
  request.mutable_file_containing_extension()->set_extension_number(1000);
  EXPECT_EQ(service.answer(request).error_response().error_code(), ::grpc::StatusCode::NOT_FOUND);
  request.clear_message_request();
  EXPECT_EQ(service.answer(request).error_response().error_code(),
            ::grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ReflectionService, ListsTheServersServicesAndExtensionNumbers) {
  ReflectionService service;
  ServerReflectionRequest request;
  request.set_list_services("*");
  EXPECT_EQ(service.answer(request).list_services_response().service_size(), 0)
      << "nothing listed before the server is built";
  const std::vector<std::string> names = {"pagoda.v1.InferenceService", "grpc.health.v1.Health"};
  service.set_service_names(&names);
  const ServerReflectionResponse response = service.answer(request);
  ASSERT_EQ(response.list_services_response().service_size(), 2);
  EXPECT_EQ(response.list_services_response().service(1).name(), "grpc.health.v1.Health");

  request.set_all_extension_numbers_of_type("pagoda.v1.GenerateRequest");
  const ServerReflectionResponse numbers = service.answer(request);
  ASSERT_TRUE(numbers.has_all_extension_numbers_response());
  EXPECT_EQ(numbers.all_extension_numbers_response().base_type_name(), "pagoda.v1.GenerateRequest");
  EXPECT_EQ(numbers.all_extension_numbers_response().extension_number_size(), 0);
}

}  // namespace
}  // namespace pagoda::grpc
