// /v1/completions request validation: the prompt as a string, a list of strings, a list of token
// ids or a list of those; echo; integer logprobs; the same sampling parameters as chat. One
// engine request per prompt. docs/api.md lists every parameter.
#pragma once

#include "api/api_error.h"
#include "api/generation_job.h"
#include "api/served_model.h"

namespace pagoda::api {

/// Most prompts one completion request may carry.
inline constexpr std::size_t kMaxPromptsPerRequest = 256;

/// Validates a completion request body into one engine request per prompt. 400 naming the
/// parameter (wrong types, empty prompts, token ids outside the vocabulary, echo with logprobs,
/// suffix, best_of != n, prompt + max_tokens over max_model_len with the numbers); 404 for an
/// unknown model. Unknown fields are ignored.
ApiErrorOr<GenerationJob> parse_completion_request(const Json& body, const ServedModel& model,
                                                   const RequestContext& context = {});

}  // namespace pagoda::api
