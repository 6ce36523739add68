#include "api/completion_request.h"

#include <algorithm>

#include "api/request_fields.h"
#include "api/sampling_fields.h"
#include "api/structured_output.h"
#include "pagoda/sampling_params.h"

namespace pagoda::api {

namespace {

// OpenAI's default for /v1/completions.
constexpr std::int64_t kDefaultCompletionMaxTokens = 16;

struct Prompt {
  std::vector<std::int32_t> token_ids;
  // The prompt as text (given, or decoded from the ids), for echo.
  std::string text;
  std::string param;
};

std::optional<ApiError> token_ids(const Json& ids, const ServedModel& model,
                                  const std::string& param, Prompt& prompt) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::optional<std::int64_t> id = json_integer(ids[i]);
    if (!id || *id < 0 || *id >= model.vocab_size) {
      return ApiError::invalid_request(
          "'" + param + "[" + std::to_string(i) + "]' must be a token id in [0, " +
              std::to_string(model.vocab_size) + "), got " + ids[i].dump(),
          param);
    }
    prompt.token_ids.push_back(static_cast<std::int32_t>(*id));
  }
  if (prompt.token_ids.empty()) {
    return ApiError::invalid_request("'" + param + "' is an empty list of token ids", param);
  }
  prompt.text = model.tokenizer->decode(prompt.token_ids);
  return std::nullopt;
}

std::optional<ApiError> text_prompt(const std::string& text, const ServedModel& model,
                                    bool add_special_tokens, const std::string& param,
                                    Prompt& prompt) {
  // Client text must not forge control tokens.
  prompt.token_ids = model.tokenizer->encode(
      text, {.add_special_tokens = add_special_tokens, .parse_special = false});
  prompt.text = text;
  if (prompt.token_ids.empty()) {
    return ApiError::invalid_request("'" + param + "' is empty; give at least one token of text",
                                     param);
  }
  return std::nullopt;
}

ApiErrorOr<std::vector<Prompt>> read_prompts(const Json* value, const ServedModel& model,
                                             bool add_special_tokens) {
  constexpr std::string_view kShapes =
      "a string, a list of strings, a list of token ids or a list of token-id lists";
  if (value == nullptr) return ApiError::invalid_request("'prompt' is required", "prompt");
  std::vector<Prompt> prompts;
  if (value->is_string()) {
    Prompt& p = prompts.emplace_back();
    p.param = "prompt";
    PAGODA_API_RETURN_IF_ERROR(
        text_prompt(value->get<std::string>(), model, add_special_tokens, p.param, p));
    return prompts;
  }
  if (!value->is_array()) {
    return ApiError::invalid_request(
        "'prompt' must be " + std::string(kShapes) + ", got " + json_type_name(*value), "prompt");
  }
  if (value->empty()) return ApiError::invalid_request("'prompt' is an empty list", "prompt");
  if (value->front().is_number()) {
    Prompt& p = prompts.emplace_back();
    p.param = "prompt";
    PAGODA_API_RETURN_IF_ERROR(token_ids(*value, model, p.param, p));
    return prompts;
  }
  if (value->size() > kMaxPromptsPerRequest) {
    return ApiError::invalid_request("'prompt' holds " + std::to_string(value->size()) +
                                         " prompts; at most " +
                                         std::to_string(kMaxPromptsPerRequest) + " are allowed",
                                     "prompt");
  }
  const bool strings = value->front().is_string();
  for (std::size_t i = 0; i < value->size(); ++i) {
    const Json& item = (*value)[i];
    Prompt& p = prompts.emplace_back();
    p.param = "prompt[" + std::to_string(i) + "]";
    if (strings && item.is_string()) {
      PAGODA_API_RETURN_IF_ERROR(
          text_prompt(item.get<std::string>(), model, add_special_tokens, p.param, p));
    } else if (!strings && item.is_array()) {
      PAGODA_API_RETURN_IF_ERROR(token_ids(item, model, p.param, p));
    } else {
      return ApiError::invalid_request("'prompt' must be " + std::string(kShapes) + "; '" +
                                           p.param + "' is " + json_type_name(item),
                                       p.param);
    }
  }
  return prompts;
}

void refuse_unsupported(RequestFields& fields, std::int64_t n) {
  if (fields.find("suffix") != nullptr) {
    fields.fail("suffix", "'suffix' is not supported");
  }
  if (auto best_of = fields.integer("best_of", 1); best_of && *best_of != n) {
    fields.fail("best_of", "'best_of' is not supported unless it equals 'n'");
  }
}

}  // namespace

ApiErrorOr<GenerationJob> parse_completion_request(const Json& body, const ServedModel& model,
                                                   const RequestContext& context) {
  GenerationJob job;
  ResponseOptions& response = job.response;
  response.endpoint = ApiEndpoint::kCompletions;
  engine::EngineRequest base;
  RequestFields fields(body);
  read_response_fields(fields, model, context, "cmpl-", response);
  if (!fields.ok()) return *fields.error();
  read_sampling_fields(fields, model, base);
  refuse_unsupported(fields, base.sampling.n);
  std::optional<StructuredOutputRequest> structured = read_structured_output(fields);
  response.echo = fields.boolean("echo").value_or(false);
  if (auto logprobs = fields.integer("logprobs", 0, SamplingParams::kMaxLogprobs)) {
    base.sampling.logprobs = *logprobs;
    response.logprobs = static_cast<std::int32_t>(*logprobs);
  }
  if (auto prompt_logprobs = fields.integer("prompt_logprobs", 0, SamplingParams::kMaxLogprobs)) {
    response.prompt_logprobs = static_cast<std::int32_t>(*prompt_logprobs);
  }
  // Echo with logprobs scores the prompt too (lm-evaluation-harness's loglikelihood requests):
  // the engine computes the prompt's logprobs with the larger of the two alternative counts.
  response.echo_logprobs = response.echo && response.logprobs.has_value();
  if (response.echo_logprobs || response.prompt_logprobs) {
    base.sampling.prompt_logprobs = std::max(response.echo_logprobs ? *response.logprobs : 0,
                                             response.prompt_logprobs.value_or(0));
  }
  ContextFit fit{.prompt_param = "prompt"};
  // max_tokens 0 only with echo (as vLLM): the answer is the prompt (and its logprobs).
  fit.requested_max_tokens = fields.integer("max_tokens", response.echo ? 0 : 1);
  if (fit.requested_max_tokens && *fit.requested_max_tokens == 0) {
    response.drop_generated = true;
    fit.requested_max_tokens = 1;
  }
  fit.default_max_tokens = kDefaultCompletionMaxTokens;
  const bool add_special_tokens = fields.boolean("add_special_tokens").value_or(true);
  if (!fields.ok()) return *fields.error();

  PAGODA_API_ASSIGN_OR_RETURN(std::vector<Prompt> prompts,
                              read_prompts(fields.find("prompt"), model, add_special_tokens));
  base.stream = response.stream;
  response.n = base.sampling.n;
  if (structured) {
    if (std::optional<ApiError> error = check_structured_output(*structured, model, base)) {
      return *error;
    }
    job.constraint = std::move(structured);
  }
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    engine::EngineRequest request = base;
    request.prompt_token_ids = std::move(prompts[p].token_ids);
    fit.num_prompt_tokens = static_cast<std::int64_t>(request.prompt_token_ids.size());
    fit.prompt_param = prompts[p].param;
    PAGODA_API_RETURN_IF_ERROR(fit_context(fit, model, request));
    request.request_id = prompts.size() == 1 ? response.id : response.id + "-" + std::to_string(p);
    response.num_prompt_tokens.push_back(fit.num_prompt_tokens);
    response.echo_texts.push_back(response.echo ? std::move(prompts[p].text) : std::string());
    if (response.echo_logprobs) response.first_prompt_tokens.push_back(request.prompt_token_ids[0]);
    job.requests.push_back(std::move(request));
  }
  return job;
}

}  // namespace pagoda::api
