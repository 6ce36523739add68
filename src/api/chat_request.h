// /v1/chat/completions request validation: OpenAI's ChatCompletion parameters plus vLLM's common
// extensions, each checked with an error naming the parameter, the messages rendered with the
// model's chat template and tokenized, the length checked against max_model_len. The HTTP and
// gRPC frontends share this one validator. docs/api.md lists every parameter.
#pragma once

#include "api/api_error.h"
#include "api/generation_job.h"
#include "api/served_model.h"

namespace pagoda::api {

/// Validates a chat completion request body (already through parse_request_body) into one
/// engine request. 400 naming the parameter for wrong types, out-of-range values, bad messages,
/// a bad structured-output constraint or tool_choice, a prompt + max_tokens
/// over max_model_len (with the numbers), no chat template; 404 for an unknown model. Unknown
/// fields are ignored.
ApiErrorOr<GenerationJob> parse_chat_request(const Json& body, const ServedModel& model,
                                             const RequestContext& context = {});

}  // namespace pagoda::api
