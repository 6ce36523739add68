// The request fields chat and completions share: the model, streaming options, the sampling
// parameters (OpenAI's and vLLM's extensions) and the max_tokens / context-length rule. Each
// reader records the first error in the RequestFields it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/generation_job.h"
#include "api/request_fields.h"
#include "api/served_model.h"
#include "engine/engine_client.h"

namespace pagoda::api {

/// Widest temperature accepted (OpenAI's limit).
inline constexpr double kMaxTemperature = 2.0;

/// `model` (the served name when absent; 404 for another name), `stream`, `stream_options`,
/// and the response id and created time from `context`, into `response`.
void read_response_fields(RequestFields& fields, const ServedModel& model,
                          const RequestContext& context, std::string_view id_prefix,
                          ResponseOptions& response);

/// Sampling and output fields shared by both endpoints into `request`: temperature, top_p,
/// top_k, min_p, the penalties, logit_bias, seed, n, stop, stop_token_ids, min_tokens,
/// ignore_eos, skip_special_tokens, include_stop_str_in_output, priority, cache_salt, user,
/// max_reasoning_tokens / reasoning_effort (reasoning models only) and trace.
/// Unset sampling fields take the model's generation_config defaults.
void read_sampling_fields(RequestFields& fields, const ServedModel& model,
                          engine::EngineRequest& request);

/// How a prompt of `num_prompt_tokens` and the requested completion length fit max_model_len.
struct ContextFit {
  std::int64_t num_prompt_tokens = 0;
  /// The client's max_tokens (or max_completion_tokens), if it gave one.
  std::optional<std::int64_t> requested_max_tokens;
  /// Name of the parameter the client used for it.
  std::string_view max_tokens_param = "max_tokens";
  /// Used when the client gave none; clamped to the room left. Unset: up to max_model_len.
  std::optional<std::int64_t> default_max_tokens;
  /// "messages" or "prompt", for errors about the prompt's length.
  std::string_view prompt_param = "prompt";
};

/// Sets request.max_tokens by `fit`, or says (with the numbers) why the prompt and the
/// completion do not fit max_model_len; also checks min_tokens against the result.
std::optional<ApiError> fit_context(const ContextFit& fit, const ServedModel& model,
                                    engine::EngineRequest& request);

/// `prefix` followed by 32 random hex digits ("chatcmpl-9f2c...").
std::string random_response_id(std::string_view prefix);

/// Seconds since the Unix epoch.
std::int64_t unix_time_now();

}  // namespace pagoda::api
