// vLLM's /tokenize and /detokenize, request and response shapes alike:
//
//   /tokenize   {model?, prompt, add_special_tokens = true, return_token_strs = false}
//            or {model?, messages, add_generation_prompt = true, continue_final_message = false,
//                add_special_tokens = false, tools?, chat_template_kwargs?}
//            -> {count, max_model_len, tokens, token_strs}
//   /detokenize {model?, tokens} -> {prompt}
//   /tokenizer_info -> {tokenizer_class, bos_token, eos_token, pad_token, chat_template,
//                       model_max_length, vocab_size}: what a client needs to tokenize through
//                       this server (lm-evaluation-harness's "remote" tokenizer backend checks
//                       for eos_token, then uses /tokenize and /detokenize).
#pragma once

#include "api/api_error.h"
#include "api/served_model.h"

namespace pagoda::api {

/// The /tokenize response for `body`; 400 naming the parameter, 404 for an unknown model.
ApiErrorOr<Json> tokenize_response(const Json& body, const ServedModel& model);

/// The /detokenize response for `body`; 400 for ids outside the vocabulary, 404 for an unknown
/// model.
ApiErrorOr<Json> detokenize_response(const Json& body, const ServedModel& model);

/// The /tokenizer_info response (vLLM's shape; fields this server does not know are null).
ApiErrorOr<Json> tokenizer_info_response(const ServedModel& model);

}  // namespace pagoda::api
