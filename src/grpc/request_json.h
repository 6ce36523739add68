// gRPC requests in the HTTP API's JSON shape, so that one validator (src/api) checks both
// transports: the same parameters are accepted, the same values refused with the same messages.
//
//   GenerateRequest{text | token_ids}  ->  a /v1/completions body        parse_completion_request
//   GenerateRequest{chat}              ->  a /v1/chat/completions body   parse_chat_request
//   TokenizeRequest, DetokenizeRequest ->  /tokenize, /detokenize bodies tokenize_api.h
//
// Only fields the client set are written, so unset fields take the HTTP API's defaults.
#pragma once

#include "api/api_error.h"
#include "api/generation_job.h"
#include "pagoda/v1/generate.pb.h"
#include "pagoda/v1/tokenize.pb.h"

namespace pagoda::grpc {

/// A GenerateRequest as the body of the HTTP endpoint that serves its kind of input.
struct GenerateJson {
  api::ApiEndpoint endpoint = api::ApiEndpoint::kCompletions;
  api::Json body;
};

/// The body for `request`; 400 when it has no input. Always a streaming request.
api::ApiErrorOr<GenerateJson> generate_request_json(const v1::GenerateRequest& request);

/// The /tokenize body for `request`; 400 when it has no input.
api::ApiErrorOr<api::Json> tokenize_request_json(const v1::TokenizeRequest& request);

/// The /detokenize body for `request`.
api::Json detokenize_request_json(const v1::DetokenizeRequest& request);

}  // namespace pagoda::grpc
