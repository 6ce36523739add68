// vLLM's /tokenize and /detokenize, request and response shapes alike:
//
//   /tokenize   {model?, prompt, add_special_tokens = true, return_token_strs = false}
//            or {model?, messages, add_generation_prompt = true, continue_final_message = false,
//                add_special_tokens = false, tools?, chat_template_kwargs?}
//            -> {count, max_model_len, tokens, token_strs}
//   /detokenize {model?, tokens} -> {prompt}
#pragma once

#include "api/api_error.h"
#include "api/served_model.h"

namespace pagoda::api {

/// The /tokenize response for `body`; 400 naming the parameter, 404 for an unknown model.
ApiErrorOr<Json> tokenize_response(const Json& body, const ServedModel& model);

/// The /detokenize response for `body`; 400 for ids outside the vocabulary, 404 for an unknown
/// model.
ApiErrorOr<Json> detokenize_response(const Json& body, const ServedModel& model);

}  // namespace pagoda::api
