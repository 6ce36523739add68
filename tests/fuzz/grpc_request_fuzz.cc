// libFuzzer target for the gRPC requests (pagoda.v1 Generate, Tokenize, Detokenize): any bytes
// that protobuf parses must become an HTTP-shaped body (grpc/request_json.h) and then an engine
// request or a client's error, never crash or hang. The first byte picks the message; the rest is
// its wire form. A refused request's gRPC code must be a client's (INVALID_ARGUMENT, NOT_FOUND,
// OUT_OF_RANGE, ...), never INTERNAL or UNKNOWN, and an accepted Generate makes exactly one
// engine request, as InferenceService::prepare checks. Built by scripts/fuzz.sh.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/tokenize_api.h"
#include "fuzz_served_model.h"
#include "grpc/grpc_status.h"
#include "grpc/request_json.h"

namespace pagoda::fuzz {
namespace {

void expect_clients_error(const api::ApiError& error) {
  if (error.http_status < 400 || error.http_status >= 500) std::abort();
  const ::grpc::StatusCode code = grpc::to_grpc_status(error).error_code();
  if (code == ::grpc::StatusCode::OK || code == ::grpc::StatusCode::INTERNAL ||
      code == ::grpc::StatusCode::UNKNOWN) {
    std::abort();
  }
}

void generate(const v1::GenerateRequest& request, const api::ServedModel& model) {
  api::ApiErrorOr<grpc::GenerateJson> json = grpc::generate_request_json(request);
  if (!json.ok()) return expect_clients_error(json.error());
  const api::RequestContext context{.id = request.request_id()};
  api::ApiErrorOr<api::GenerationJob> job =
      json->endpoint == api::ApiEndpoint::kChatCompletions
          ? api::parse_chat_request(json->body, model, context)
          : api::parse_completion_request(json->body, model, context);
  if (!job.ok()) return expect_clients_error(job.error());
  if (job->requests.size() != 1) std::abort();
}

void tokenize(const v1::TokenizeRequest& request, const api::ServedModel& model) {
  api::ApiErrorOr<api::Json> body = grpc::tokenize_request_json(request);
  if (!body.ok()) return expect_clients_error(body.error());
  api::ApiErrorOr<api::Json> response = api::tokenize_response(*body, model);
  if (!response.ok()) expect_clients_error(response.error());
}

void detokenize(const v1::DetokenizeRequest& request, const api::ServedModel& model) {
  api::ApiErrorOr<api::Json> response =
      api::detokenize_response(grpc::detokenize_request_json(request), model);
  if (!response.ok()) expect_clients_error(response.error());
}

// Past the model check, which a fuzzer would rarely get by by chance; an empty name stays (it
// means the server's one model).
template <typename Request>
bool parse(const std::uint8_t* data, std::size_t size, Request& request) {
  if (!request.ParseFromArray(data, static_cast<int>(size))) return false;
  if (!request.model().empty()) request.set_model("m");
  return true;
}

}  // namespace
}  // namespace pagoda::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parsing refuses strings that are not UTF-8 with a log line each; the fuzzer makes many.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda;
  if (size == 0) return 0;
  const api::ServedModel& model = fuzz::served_model();
  const std::uint8_t* wire = data + 1;
  const std::size_t wire_size = size - 1;
  switch (data[0] % 3) {
    case 0:
      if (v1::GenerateRequest request; fuzz::parse(wire, wire_size, request)) {
        fuzz::generate(request, model);
      }
      break;
    case 1:
      if (v1::TokenizeRequest request; fuzz::parse(wire, wire_size, request)) {
        fuzz::tokenize(request, model);
      }
      break;
    default:
      if (v1::DetokenizeRequest request; fuzz::parse(wire, wire_size, request)) {
        fuzz::detokenize(request, model);
      }
  }
  return 0;
}
