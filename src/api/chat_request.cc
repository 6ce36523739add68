#include "api/chat_request.h"

#include "api/chat_prompt.h"
#include "api/forced_tool_calls.h"
#include "api/request_fields.h"
#include "api/sampling_fields.h"
#include "api/structured_output.h"
#include "pagoda/sampling_params.h"

namespace pagoda::api {

namespace {

// Tools offered with tool_choice "auto" (OpenAI's default when tools are given).
bool wants_auto_tool_calls(const Json& body) {
  const auto tools = body.find("tools");
  if (tools == body.end() || !tools->is_array() || tools->empty()) return false;
  const auto choice = body.find("tool_choice");
  return choice == body.end() || *choice == "auto";
}

}  // namespace

ApiErrorOr<GenerationJob> parse_chat_request(const Json& body, const ServedModel& model,
                                             const RequestContext& context) {
  GenerationJob job;
  job.response.endpoint = ApiEndpoint::kChatCompletions;
  engine::EngineRequest request;
  RequestFields fields(body);
  read_response_fields(fields, model, context, "chatcmpl-", job.response);
  // A 404 for the model comes before complaints about the rest.
  if (!fields.ok()) return *fields.error();
  read_sampling_fields(fields, model, request);
  std::optional<StructuredOutputRequest> structured = read_structured_output(fields);
  if (std::optional<ForcedToolCalls> forced = read_forced_tool_calls(fields)) {
    if (structured) {
      fields.fail("tool_choice", "forced tool calls ('tool_choice') cannot be combined with '" +
                                     structured->param + "'");
    }
    structured = StructuredOutputRequest{std::move(forced->spec), "tool_choice"};
    job.response.tool_calls = std::move(forced->format);
  } else if (model.tool_call_parser != nullptr && wants_auto_tool_calls(body)) {
    job.response.auto_tool_calls = model.tool_call_parser;
  }
  // A thinking model's span goes to reasoning_content.
  request.separate_reasoning = model.reasoning.has_value();
  job.response.reasoning = model.reasoning.has_value();

  const bool logprobs = fields.boolean("logprobs").value_or(false);
  const std::optional<std::int64_t> top_logprobs =
      fields.integer("top_logprobs", 0, SamplingParams::kMaxLogprobs);
  if (top_logprobs && !logprobs) {
    fields.fail("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  }
  if (logprobs) {
    request.sampling.logprobs = top_logprobs.value_or(0);
    job.response.logprobs = static_cast<std::int32_t>(*request.sampling.logprobs);
  }

  ContextFit fit{.prompt_param = "messages"};
  const std::optional<std::int64_t> max_tokens = fields.integer("max_tokens", 1);
  const std::optional<std::int64_t> max_completion_tokens =
      fields.integer("max_completion_tokens", 1);
  // OpenAI's newer name wins when both are given, as in vLLM.
  if (max_completion_tokens) {
    fit.requested_max_tokens = max_completion_tokens;
    fit.max_tokens_param = "max_completion_tokens";
  } else {
    fit.requested_max_tokens = max_tokens;
  }
  fit.default_max_tokens = model.generation.max_new_tokens;
  const bool add_special_tokens = fields.boolean("add_special_tokens").value_or(false);
  if (!fields.ok()) return *fields.error();

  PAGODA_API_ASSIGN_OR_RETURN(std::string prompt, render_chat_prompt(body, model));
  // The template writes BOS and the chat markers itself; their text must become their ids.
  request.prompt_token_ids = model.tokenizer->encode(
      prompt, {.add_special_tokens = add_special_tokens, .parse_special = true});
  if (request.prompt_token_ids.empty()) {
    return ApiError::invalid_request("the rendered chat has no tokens", "messages");
  }
  fit.num_prompt_tokens = static_cast<std::int64_t>(request.prompt_token_ids.size());
  PAGODA_API_RETURN_IF_ERROR(fit_context(fit, model, request));
  if (structured) {
    if (std::optional<ApiError> error = check_structured_output(*structured, model, request)) {
      return *error;
    }
    job.constraint = std::move(structured);
  }

  request.request_id = job.response.id;
  request.stream = job.response.stream;
  job.response.n = request.sampling.n;
  job.response.num_prompt_tokens = {fit.num_prompt_tokens};
  job.response.echo_texts = {""};
  job.requests.push_back(std::move(request));
  return job;
}

}  // namespace pagoda::api
