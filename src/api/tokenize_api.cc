#include "api/tokenize_api.h"

#include "api/chat_prompt.h"
#include "api/request_fields.h"

namespace pagoda::api {

namespace {

std::optional<ApiError> check_model(RequestFields& fields, const ServedModel& model) {
  if (std::optional<std::string> name = fields.string("model")) {
    if (!model.serves(*name)) return ApiError::model_not_found(*name);
  }
  return fields.error();
}

}  // namespace

ApiErrorOr<Json> tokenize_response(const Json& body, const ServedModel& model) {
  RequestFields fields(body);
  PAGODA_API_RETURN_IF_ERROR(check_model(fields, model));
  const bool has_prompt = fields.find("prompt") != nullptr;
  const bool has_messages = fields.find("messages") != nullptr;
  if (has_prompt == has_messages) {
    return ApiError::invalid_request("give exactly one of 'prompt' or 'messages'",
                                     has_prompt ? "messages" : "prompt");
  }
  const bool return_token_strs = fields.boolean("return_token_strs").value_or(false);
  std::vector<std::int32_t> tokens;
  if (has_prompt) {
    const std::optional<std::string> prompt = fields.string("prompt");
    const bool add_special_tokens = fields.boolean("add_special_tokens").value_or(true);
    if (!fields.ok()) return *fields.error();
    // Plain text: special-token spellings stay text, as for completion prompts.
    tokens = model.tokenizer->encode(
        *prompt, {.add_special_tokens = add_special_tokens, .parse_special = false});
  } else {
    const bool add_special_tokens = fields.boolean("add_special_tokens").value_or(false);
    if (!fields.ok()) return *fields.error();
    PAGODA_API_ASSIGN_OR_RETURN(std::string text, render_chat_prompt(body, model));
    tokens = model.tokenizer->encode(
        text, {.add_special_tokens = add_special_tokens, .parse_special = true});
  }
  Json response = {
      {"count", tokens.size()}, {"max_model_len", model.max_model_len}, {"tokens", tokens}};
  if (return_token_strs) {
    Json strs = Json::array();
    for (const std::int32_t id : tokens) {
      strs.push_back(std::string(model.tokenizer->token_to_piece(id).value_or("")));
    }
    response["token_strs"] = std::move(strs);
  } else {
    response["token_strs"] = nullptr;
  }
  return response;
}

ApiErrorOr<Json> detokenize_response(const Json& body, const ServedModel& model) {
  RequestFields fields(body);
  PAGODA_API_RETURN_IF_ERROR(check_model(fields, model));
  const Json* tokens = fields.array("tokens");
  if (!fields.ok()) return *fields.error();
  if (tokens == nullptr) return ApiError::invalid_request("'tokens' is required", "tokens");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const std::optional<std::int64_t> id = json_integer((*tokens)[i]);
    if (!id || *id < 0 || *id >= model.vocab_size) {
      return ApiError::invalid_request(
          "'tokens[" + std::to_string(i) + "]' must be a token id in [0, " +
              std::to_string(model.vocab_size) + "), got " + (*tokens)[i].dump(),
          "tokens");
    }
    ids.push_back(static_cast<std::int32_t>(*id));
  }
  return Json{{"prompt", model.tokenizer->decode(ids)}};
}

ApiErrorOr<Json> tokenizer_info_response(const ServedModel& model) {
  const auto text_or_null = [](const std::string& s) {
    return s.empty() ? Json(nullptr) : Json(s);
  };
  return Json{
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"bos_token", text_or_null(model.bos_token)},
      {"eos_token", text_or_null(model.eos_token)},
      {"pad_token", nullptr},
      {"chat_template", model.chat_template ? Json(model.chat_template->source()) : Json(nullptr)},
      {"model_max_length", model.max_model_len},
      {"vocab_size", model.vocab_size}};
}

}  // namespace pagoda::api
